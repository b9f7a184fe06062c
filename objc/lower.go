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

// A convention is the rules by which one platform's C calling convention
// places integer-class arguments: registers in order, then the stack.
type convention struct {
	regs int // integer argument registers
	// hiddenStret: a struct result in memory takes the first argument
	// register for its address (System V); otherwise its address goes in
	// a register of its own (x8 on arm64).
	hiddenStret bool
	// exhaust: a 16-byte struct that does not fit in the registers left
	// goes on the stack and no later argument takes a register (AAPCS64
	// rule C.13); otherwise later arguments may still take them.
	exhaust bool
	// bigByRef: a struct over 16 bytes is copied by the caller and passed
	// as a pointer to the copy (AAPCS64); otherwise it is MEMORY class and
	// goes on the stack by value (System V).
	bigByRef bool
	// pack: an argument under 8 bytes takes only its own size on the
	// stack, at its natural alignment (Apple arm64); otherwise a whole
	// 8-byte slot.
	pack bool
}

var (
	// sysV is the System V AMD64 convention, which macOS and Linux share:
	// rdi, rsi, rdx, rcx, r8 and r9.
	sysV = convention{regs: 6, hiddenStret: true}
	// aapcs64 is the Arm 64-bit convention as Linux uses it: x0 to x7.
	aapcs64 = convention{regs: 8, exhaust: true, bigByRef: true}
	// appleArm64 is AAPCS64 with Apple's change ("Writing ARM64 code for
	// Apple platforms"): stack arguments packed at natural alignment.
	appleArm64 = convention{regs: 8, exhaust: true, bigByRef: true, pack: true}
)

// lowerAmd64 places arguments under System V AMD64; stret says the result
// is a struct returned in memory. It returns the bytes of stack used.
func lowerAmd64(kinds []typeenc.Kind, stret bool, out []place) (stack int, err error) {
	return sysV.lower(kinds, stret, out)
}

// lowerArm64 places arguments under AAPCS64 as Linux uses it.
func lowerArm64(kinds []typeenc.Kind, out []place) (stack int, err error) {
	return aapcs64.lower(kinds, false, out)
}

// lowerArm64Apple places arguments under Apple's arm64 convention.
func lowerArm64Apple(kinds []typeenc.Kind, out []place) (stack int, err error) {
	return appleArm64.lower(kinds, false, out)
}

// lower places each argument of the given kinds in out: in the next free
// integer registers when enough are left (one for an integer, pointer or
// object, two for a 16-byte struct, one for the pointer to a larger
// struct passed by reference), else on the stack. It returns the bytes of
// stack used, rounded up to 8.
func (c convention) lower(kinds []typeenc.Kind, stret bool, out []place) (stack int, err error) {
	st := c.start(stret)
	for i, k := range kinds {
		var ok bool
		if out[i], ok = c.place(&st, k); !ok {
			return 0, unpassable(i, k)
		}
	}
	return st.stackBytes(), nil
}

// lowerState is the state of a lowering between arguments: the next free
// register and the bytes of stack used.
type lowerState struct{ next, stack int }

func (c convention) start(stret bool) lowerState {
	if stret && c.hiddenStret {
		return lowerState{next: 1}
	}
	return lowerState{}
}

func (st *lowerState) stackBytes() int { return (st.stack + 7) &^ 7 }

func unpassable(i int, k typeenc.Kind) error {
	return fmt.Errorf("objc: argument %d is %v, which sends do not pass", i, k)
}

// place places an argument of kind k after those already placed in st,
// or returns false for a kind the conventions here do not pass.
func (c *convention) place(st *lowerState, k typeenc.Kind) (place, bool) {
	n, size, byRef := 0, k.Size(), false
	switch {
	case isScalar(k):
		n = 1
	case k == typeenc.Struct16:
		n = 2
	case k == typeenc.Struct24 && c.bigByRef:
		n, size, byRef = 1, 8, true
	case k == typeenc.Struct24:
	default:
		return place{}, false
	}
	if n > 0 && st.next+n <= c.regs {
		p := place{reg: int8(st.next), byRef: byRef}
		st.next += n
		return p, true
	}
	if k == typeenc.Struct16 && c.exhaust {
		st.next = c.regs
	}
	// On the stack: a whole 8-byte slot per 8 bytes, or the argument's
	// own size at its natural alignment where the stack is packed.
	align := 8
	if c.pack && size < 8 {
		align = size
	} else {
		size = (size + 7) &^ 7
	}
	st.stack = (st.stack + align - 1) &^ (align - 1)
	p := place{reg: -1, off: int16(st.stack), byRef: byRef}
	st.stack += size
	return p, true
}

// isScalar reports whether k is an integer, pointer or object, which the
// conventions pass in one integer register or one stack slot.
func isScalar(k typeenc.Kind) bool {
	switch k {
	case typeenc.Object, typeenc.Word, typeenc.Int32, typeenc.Int16, typeenc.Int8:
		return true
	}
	return false
}

// A result is where the C convention returns a method's result.
type result struct {
	regs   int  // integer registers holding it, from x0 or rax
	float  bool // in the first floating-point register, d0 or xmm0
	memory bool // in memory the caller provides: its address in x8 on arm64, a hidden first argument on amd64
}

// resultOf returns where a result of kind k is returned, the same under
// System V AMD64 and AAPCS64 (Linux's and Apple's): integers and pointers
// in rax or x0 (a BOOL in its low byte), a 16-byte struct of integers in
// rax and rdx or x0 and x1, double in xmm0 or d0, a 24-byte struct in
// memory the caller provides, whose address is a hidden first argument
// (rdi) on amd64 and goes in x8 on arm64.
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

// host is the convention of the platform the program runs on; it has no
// registers where sends are not implemented.
var host = func() convention {
	switch {
	case runtime.GOARCH == "amd64":
		return sysV
	case runtime.GOARCH == "arm64" && runtime.GOOS == "darwin":
		return appleArm64
	case runtime.GOARCH == "arm64":
		return aapcs64
	}
	return convention{}
}()

// lower lays out a send's arguments in w for purego.SyscallN, which puts
// its first values in the integer argument registers and the rest on the
// stack in 8-byte words: the register words, padded to all the registers
// when anything is on the stack, then the stack words. A struct passed by
// reference is copied into s. ret, when not 0, is the address for a
// struct result returned in memory through a hidden first argument
// (amd64). It returns the number of words.
func lower(w *[maxWords]uintptr, s *scratch, ret uintptr, id ID, sel SEL, args []Arg) int {
	if host.regs == 0 {
		panic("objc: message sends are implemented for amd64 and arm64 only, not " + runtime.GOARCH)
	}
	st := host.start(ret != 0)
	used := 0
	if ret != 0 {
		w[0], used = ret, 1
	}
	w[used], w[used+1] = uintptr(id), uintptr(sel)
	st.next += 2
	used += 2
	nstruct := 0
	for i := range args {
		a := &args[i]
		p, ok := host.place(&st, a.kind)
		if !ok {
			panic(unpassable(i+2, a.kind))
		}
		v, nw := a.w, a.kind.Size()/8
		if p.byRef {
			if nstruct == len(s.structs) {
				panic("objc: too many struct arguments for one send")
			}
			s.structs[nstruct] = v
			v[0], nw = Pointer(&s.structs[nstruct]), 1
			nstruct++
		}
		at := int(p.reg)
		if p.reg < 0 {
			if p.off%8 != 0 {
				panic(fmt.Sprintf("objc: argument %d is packed at stack offset %d; sends pass whole 8-byte words", i, p.off))
			}
			at = host.regs + int(p.off)/8
		}
		if at+nw > len(w) {
			panic(fmt.Sprintf("objc: %d arguments for one send need more than %d words", len(args), len(w)))
		}
		for j := range nw {
			w[at+j] = v[j]
		}
		used = max(used, at+nw)
	}
	if st.stack == 0 {
		return used
	}
	return host.regs + st.stackBytes()/8
}

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
		return fmt.Errorf("type encoding %q does not start with a result type, \"@\" and \":\"", types)
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
		if k := kinds[i]; !isScalar(k) && k != typeenc.Struct16 && k != typeenc.Struct24 {
			return fmt.Errorf("type encoding %q: argument %d (%q) is %v, which sends do not pass", types, i-2, t, kinds[i])
		}
	}
	k := kinds[:len(enc)-1]
	var out [maxArgs]place
	for _, c := range []struct {
		name string
		conv convention
	}{{"amd64", sysV}, {"Linux arm64", aapcs64}, {"Apple arm64", appleArm64}} {
		stack, err := c.conv.lower(k, res == typeenc.Struct24, out[:len(k)])
		if err != nil {
			return fmt.Errorf("type encoding %q: %v", types, err)
		}
		if c.conv.regs+stack/8 > maxWords {
			return fmt.Errorf("type encoding %q needs %d bytes of stack on %s; a send passes at most %d", types, stack, c.name, 8*(maxWords-c.conv.regs))
		}
	}
	// out holds Apple arm64's places, the last lowered.
	for i, kind := range k {
		if p := out[i]; p.reg < 0 && kind.Size() < 8 {
			return fmt.Errorf("type encoding %q: argument %d (%q, %d bytes) goes on the stack on Apple arm64, packed to its size at offset %d, but sends pass whole 8-byte words", types, i-2, enc[i+1], kind.Size(), p.off)
		}
	}
	return nil
}
