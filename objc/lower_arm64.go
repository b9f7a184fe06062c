package objc

// lower lays out a send's arguments for purego.SyscallN under the AAPCS64
// convention: integer-class words go in x0-x7, then on the stack in 8-byte
// slots. A 16-byte struct of integers takes two registers if two are free;
// otherwise no further argument uses a register and it goes on the stack. A
// struct larger than 16 bytes is copied to memory by the caller and passed
// as a pointer, here into s. Struct results use x8 and are not lowered here.
func lower(w *[maxWords]uintptr, s *scratch, _ uintptr, id ID, sel SEL, args []Arg) int {
	const nregs = 8
	var regs [nregs]uintptr
	var stack [maxWords - nregs]uintptr
	nr, ns, nstruct := 2, 0, 0
	regs[0], regs[1] = uintptr(id), uintptr(sel)
	push := func(v uintptr) {
		if ns == len(stack) {
			panic("objc: too many arguments for one send")
		}
		stack[ns] = v
		ns++
	}
	word := func(v uintptr) {
		if nr < nregs {
			regs[nr] = v
			nr++
		} else {
			push(v)
		}
	}
	for _, a := range args {
		switch a.kind {
		case kindWord:
			word(a.w[0])
		case kindStruct16:
			if nr+2 <= nregs {
				regs[nr], regs[nr+1] = a.w[0], a.w[1]
				nr += 2
			} else {
				nr = nregs
				push(a.w[0])
				push(a.w[1])
			}
		case kindStruct24:
			if nstruct == len(s.structs) {
				panic("objc: too many struct arguments for one send")
			}
			s.structs[nstruct] = a.w
			word(Pointer(&s.structs[nstruct]))
			nstruct++
		}
	}
	if ns == 0 {
		copy(w[:], regs[:nr])
		return nr
	}
	copy(w[:nregs], regs[:])
	copy(w[nregs:], stack[:ns])
	return nregs + ns
}
