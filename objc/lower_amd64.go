package objc

// lower lays out a send's arguments for purego.SyscallN under the System V
// AMD64 convention: the first six integer-class words go in rdi, rsi, rdx,
// rcx, r8 and r9, the rest on the stack in order. A 16-byte struct of
// integers takes two registers if two are free, else goes whole on the
// stack; a 24-byte struct is MEMORY class and always goes on the stack
// without using a register. SyscallN puts its first six values in the
// registers and the others on the stack, so the register part is padded to
// six words when anything is on the stack. ret, when not 0, is the hidden
// pointer for a struct result and takes the first register.
func lower(w *[maxWords]uintptr, _ *scratch, ret uintptr, id ID, sel SEL, args []Arg) int {
	const nregs = 6
	var regs [nregs]uintptr
	var stack [maxWords - nregs]uintptr
	nr, ns := 0, 0
	if ret != 0 {
		regs[nr] = ret
		nr++
	}
	regs[nr], regs[nr+1] = uintptr(id), uintptr(sel)
	nr += 2
	push := func(v uintptr) {
		if ns == len(stack) {
			panic("objc: too many arguments for one send")
		}
		stack[ns] = v
		ns++
	}
	for _, a := range args {
		switch a.kind {
		case kindWord:
			if nr < nregs {
				regs[nr] = a.w[0]
				nr++
			} else {
				push(a.w[0])
			}
		case kindStruct16:
			if nr+2 <= nregs {
				regs[nr], regs[nr+1] = a.w[0], a.w[1]
				nr += 2
			} else {
				push(a.w[0])
				push(a.w[1])
			}
		case kindStruct24:
			push(a.w[0])
			push(a.w[1])
			push(a.w[2])
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
