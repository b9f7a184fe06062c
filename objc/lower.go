package objc

import (
	"fmt"
	"runtime"

	"github.com/puremetal/puremetal/internal/typeenc"
)

// The lowering of a send's arguments: where the C calling convention of
// each platform puts each argument, as pure functions of the arguments'
// kinds, usable (and tested against clang) on any host. The receiver and
// the selector are the first two arguments.

// maxArgs is the most arguments one send passes, receiver and selector
// included.
const maxArgs = maxWords

// A place is where one argument goes.
type place struct {
	// reg is the first integer register holding the argument (0 is x0 on
	// arm64, rdi on amd64), or -1 when it is on the stack.
	reg int8
	// off is the argument's byte offset from the stack pointer at the
	// call, when it is on the stack.
	off int16
	// byRef reports that the argument is passed as a pointer to a copy of
	// it made by the caller; the pointer is what reg or off holds.
	byRef bool
}

// words returns how many integer registers or 8-byte stack words an
// argument of kind k takes in place p.
func (p place) words(k typeenc.Kind) int {
	if p.byRef {
		return 1
	}
	return (k.Size() + 7) / 8
}

// lowerAmd64 places arguments under the System V AMD64 convention, which
// macOS and Linux share: integer-class arguments take rdi, rsi, rdx, rcx,
// r8 and r9 in turn, then 8-byte stack slots in order (an argument smaller
// than 8 bytes still takes a whole slot). A 16-byte struct of integers
// takes two registers if two are free, else goes whole on the stack while
// later arguments may still take registers; a 24-byte struct is MEMORY
// class and always goes on the stack. When stret is set the result is a
// struct returned in memory, whose address is a hidden first argument in
// rdi. It returns the bytes of stack used.
func lowerAmd64(kinds []typeenc.Kind, stret bool, out []place) (stack int, err error) {
	const nregs = 6
	nr := 0
	if stret {
		nr = 1
	}
	for i, k := range kinds {
		switch k {
		case typeenc.Object, typeenc.Word, typeenc.Int32, typeenc.Int16, typeenc.Int8:
			if nr < nregs {
				out[i] = place{reg: int8(nr)}
				nr++
				continue
			}
			out[i] = place{reg: -1, off: int16(stack)}
			stack += 8
		case typeenc.Struct16:
			if nr+2 <= nregs {
				out[i] = place{reg: int8(nr)}
				nr += 2
				continue
			}
			out[i] = place{reg: -1, off: int16(stack)}
			stack += 16
		case typeenc.Struct24:
			out[i] = place{reg: -1, off: int16(stack)}
			stack += 24
		default:
			return 0, fmt.Errorf("objc: argument %d is %v, which sends do not pass", i, k)
		}
	}
	return stack, nil
}

// lowerArm64 places arguments under the AAPCS64 convention as Linux uses
// it: integer-class arguments take x0 to x7 in turn, then 8-byte stack
// slots (an argument smaller than 8 bytes still takes a whole slot). A
// 16-byte struct of integers takes two registers if two are free;
// otherwise it goes on the stack and no later argument takes a register
// (rule C.13). A struct larger than 16 bytes is copied by the caller and
// passed as a pointer to the copy. A struct result goes to memory whose
// address is in x8, not an argument register, so it changes nothing here.
func lowerArm64(kinds []typeenc.Kind, out []place) (stack int, err error) {
	return arm64(kinds, false, out)
}

// lowerArm64Apple is [lowerArm64] with Apple's change to AAPCS64
// (Apple's "Writing ARM64 code for Apple platforms"): arguments on the
// stack are packed at their natural alignment, so an argument smaller
// than 8 bytes takes only its own size, and the next one may share its
// 8-byte word.
func lowerArm64Apple(kinds []typeenc.Kind, out []place) (stack int, err error) {
	return arm64(kinds, true, out)
}

func arm64(kinds []typeenc.Kind, apple bool, out []place) (stack int, err error) {
	const nregs = 8
	nr := 0
	onStack := func(size int) place {
		align := 8
		if apple && size < 8 {
			align = size
		} else {
			size = (size + 7) &^ 7
		}
		stack = (stack + align - 1) &^ (align - 1)
		p := place{reg: -1, off: int16(stack)}
		stack += size
		return p
	}
	for i, k := range kinds {
		switch k {
		case typeenc.Object, typeenc.Word, typeenc.Int32, typeenc.Int16, typeenc.Int8:
			if nr < nregs {
				out[i] = place{reg: int8(nr)}
				nr++
				continue
			}
			out[i] = onStack(k.Size())
		case typeenc.Struct16:
			if nr+2 <= nregs {
				out[i] = place{reg: int8(nr)}
				nr += 2
				continue
			}
			nr = nregs
			out[i] = onStack(16)
		case typeenc.Struct24:
			if nr < nregs {
				out[i] = place{reg: int8(nr), byRef: true}
				nr++
				continue
			}
			out[i] = onStack(8)
			out[i].byRef = true
		default:
			return 0, fmt.Errorf("objc: argument %d is %v, which sends do not pass", i, k)
		}
	}
	return (stack + 7) &^ 7, nil
}

// A result is where the C convention returns a method's result.
type result struct {
	regs   int  // integer registers holding it, from x0 or rax
	float  bool // in the first floating-point register, d0 or xmm0
	memory bool // in memory the caller provides: its address in x8 on arm64, a hidden first argument on amd64
}

// resultAmd64 returns where System V AMD64 returns a result of kind k:
// integers and pointers in rax, a 16-byte struct of integers in rax and
// rdx, double in xmm0, a 24-byte struct in memory.
func resultAmd64(k typeenc.Kind) result { return resultOf(k) }

// resultArm64 returns where AAPCS64 (Linux's and Apple's alike) returns a
// result of kind k: integers and pointers in x0, a 16-byte struct of
// integers in x0 and x1, double in d0, a larger struct in memory at x8.
func resultArm64(k typeenc.Kind) result { return resultOf(k) }

func resultOf(k typeenc.Kind) result {
	switch k {
	case typeenc.Void:
		return result{}
	case typeenc.Double, typeenc.Float:
		return result{float: true}
	case typeenc.Struct16:
		return result{regs: 2}
	case typeenc.Struct24:
		return result{memory: true}
	}
	return result{regs: 1}
}

// hostLower is the lowering of the platform the program runs on.
func hostLower(kinds []typeenc.Kind, stret bool, out []place) (int, error) {
	switch {
	case runtime.GOARCH == "amd64":
		return lowerAmd64(kinds, stret, out)
	case runtime.GOARCH == "arm64" && runtime.GOOS == "darwin":
		return lowerArm64Apple(kinds, out)
	case runtime.GOARCH == "arm64":
		return lowerArm64(kinds, out)
	}
	return 0, fmt.Errorf("objc: message sends are implemented for amd64 and arm64 only, not %s", runtime.GOARCH)
}

// lower lays out a send's arguments in w for purego.SyscallN, which puts
// its first values in the integer argument registers and the rest on the
// stack in 8-byte words: the register words, padded to all the registers
// when anything is on the stack, then the stack words. A struct passed by
// reference is copied into s. ret, when not 0, is the address for a
// struct result returned in memory through a hidden first argument
// (amd64). It returns the number of words.
func lower(w *[maxWords]uintptr, s *scratch, ret uintptr, id ID, sel SEL, args []Arg) int {
	n := 2 + len(args)
	if n > maxArgs {
		panic(fmt.Sprintf("objc: %d arguments for one send; at most %d", len(args), maxArgs-2))
	}
	var kinds [maxArgs]typeenc.Kind
	kinds[0], kinds[1] = typeenc.Word, typeenc.Word
	for i, a := range args {
		kinds[2+i] = a.kind
	}
	var places [maxArgs]place
	stack, err := hostLower(kinds[:n], ret != 0, places[:n])
	if err != nil {
		panic(err)
	}
	if hostRegs+stack/8 > len(w) {
		panic(fmt.Sprintf("objc: %d arguments need %d stack bytes; a send passes at most %d", len(args), stack, 8*(len(w)-hostRegs)))
	}
	used := 0
	if ret != 0 {
		w[0], used = ret, 1
	}
	nstruct := 0
	for i := range n {
		var v [3]uintptr
		switch i {
		case 0:
			v[0] = uintptr(id)
		case 1:
			v[0] = uintptr(sel)
		default:
			v = args[i-2].w
		}
		p := places[i]
		if p.byRef {
			if nstruct == len(s.structs) {
				panic("objc: too many struct arguments for one send")
			}
			s.structs[nstruct] = v
			v[0] = Pointer(&s.structs[nstruct])
			nstruct++
		}
		nw := p.words(kinds[i])
		at := int(p.reg)
		if p.reg < 0 {
			if p.off%8 != 0 {
				panic(fmt.Sprintf("objc: argument %d is packed at stack offset %d; sends pass whole 8-byte words", i-2, p.off))
			}
			at = hostRegs + int(p.off)/8
		}
		copy(w[at:at+nw], v[:nw])
		used = max(used, at+nw)
	}
	if stack == 0 {
		return used
	}
	return hostRegs + stack/8
}

// hostRegs is the number of integer argument registers of the platform.
var hostRegs = map[string]int{"amd64": 6, "arm64": 8}[runtime.GOARCH]

// checkTypes reports whether every platform's lowering can pass the
// arguments of a method with the type encoding types through the send
// functions, and what is wrong if not. The send functions pass
// integers as whole 8-byte words, so an argument smaller than 8 bytes that
// goes on the stack is refused where the stack packs it (Apple arm64):
// there it would take only its own size, and the callee would read the
// next arguments from the wrong bytes.
func checkTypes(types string) error {
	enc := typeenc.Split(types)
	if len(enc) < 3 || enc[1] != "@" || enc[2] != ":" {
		return fmt.Errorf("type encoding %q does not start with a result type, @ and :", types)
	}
	if len(enc)-1 > maxArgs {
		return fmt.Errorf("type encoding %q has %d arguments; a send passes at most %d", types, len(enc)-1, maxArgs)
	}
	res := typeenc.KindOf(enc[0])
	switch res {
	case typeenc.Void, typeenc.Object, typeenc.Word, typeenc.Int8, typeenc.Double, typeenc.Struct24:
	default:
		return fmt.Errorf("type encoding %q returns %q (%v), which no send function reads", types, enc[0], res)
	}
	var kinds [maxArgs]typeenc.Kind
	for i, t := range enc[1:] {
		kinds[i] = typeenc.KindOf(t)
		switch kinds[i] {
		case typeenc.Object, typeenc.Word, typeenc.Int32, typeenc.Int16, typeenc.Int8, typeenc.Struct16, typeenc.Struct24:
		default:
			return fmt.Errorf("type encoding %q: argument %d (%q) is %v, which sends do not pass", types, i-2, t, kinds[i])
		}
	}
	k := kinds[:len(enc)-1]
	var out [maxArgs]place
	if _, err := lowerAmd64(k, res == typeenc.Struct24, out[:len(k)]); err != nil {
		return fmt.Errorf("type encoding %q: %v", types, err)
	}
	if _, err := lowerArm64(k, out[:len(k)]); err != nil {
		return fmt.Errorf("type encoding %q: %v", types, err)
	}
	if _, err := lowerArm64Apple(k, out[:len(k)]); err != nil {
		return fmt.Errorf("type encoding %q: %v", types, err)
	}
	for i, kind := range k {
		if p := out[i]; p.reg < 0 && kind.Size() < 8 {
			return fmt.Errorf("type encoding %q: argument %d (%q, %d bytes) goes on the stack on Apple arm64, packed to its size at offset %d, but sends pass whole 8-byte words", types, i-2, enc[i+1], kind.Size(), p.off)
		}
	}
	return nil
}
