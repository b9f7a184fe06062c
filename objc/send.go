package objc

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/puremetal/puremetal/internal/typeenc"
)

// maxWords is the most machine words one send passes, counting the
// receiver, the selector and the register padding of the lowering.
const maxWords = 32

// Send sends sel to id with integer and pointer arguments and returns the
// object the method returns: for methods whose result is an object (id) or
// nothing (void, whose result is meaningless). Methods returning an integer
// or a pointer that is not an object are sent with [SendWord], BOOL with
// [SendBool], double with [SendFloat64], and struct arguments or results
// with [SendArgs] and [SendStruct24]. This is the hot path: it makes no
// allocation and uses no reflection.
//
// A Go pointer passed as an argument goes through [Pointer].
func Send(id ID, sel SEL, args ...uintptr) ID { return ID(send(id, sel, args)) }

// SendWord is [Send] for methods that return an integer or a pointer that
// is not an object, such as NSUInteger or void *.
func SendWord(id ID, sel SEL, args ...uintptr) uintptr { return send(id, sel, args) }

// SendBool is [Send] for methods that return an Objective-C BOOL; only the
// low byte of the result register is defined, so only it is read.
func SendBool(id ID, sel SEL, args ...uintptr) bool { return byte(send(id, sel, args)) != 0 }

func send(id ID, sel SEL, args []uintptr) uintptr {
	fn := lookup(id, sel)
	s := scratchPool.Get().(*scratch)
	s.words[0], s.words[1] = uintptr(id), uintptr(sel)
	n := 2 + copy(s.words[2:], args)
	r, _, _ := purego.SyscallN(fn, s.words[:n]...)
	scratchPool.Put(s)
	return r
}

// Send sends sel to the receiver; see the package function [Send].
func (id ID) Send(sel SEL, args ...uintptr) ID { return ID(send(id, sel, args)) }

// SendWord sends sel to the receiver; see the package function [SendWord].
func (id ID) SendWord(sel SEL, args ...uintptr) uintptr { return send(id, sel, args) }

// Send sends sel to the class object (a class method, such as alloc); see
// the package function [Send].
func (c Class) Send(sel SEL, args ...uintptr) ID { return ID(send(ID(c), sel, args)) }

// SendWord sends sel to the class object; see the package function
// [SendWord].
func (c Class) SendWord(sel SEL, args ...uintptr) uintptr { return send(ID(c), sel, args) }

// An Arg is one argument of [SendArgs]: a word, or a small struct of words
// lowered the way the C calling convention lowers it.
type Arg struct {
	kind typeenc.Kind
	w    [3]uintptr
}

// Word returns an integer or pointer argument.
func Word(v uintptr) Arg { return Arg{kind: typeenc.Word, w: [3]uintptr{v}} }

// Struct16 returns a by-value struct argument of two words, such as NSRange
// {location, length}: two integer registers when two are free, else the
// stack.
func Struct16(a, b uintptr) Arg { return Arg{kind: typeenc.Struct16, w: [3]uintptr{a, b}} }

// Struct24 returns a by-value struct argument of three words, such as
// MTLSize {width, height, depth}: on amd64 it is passed on the stack, on
// arm64 as a pointer to a copy.
func Struct24(a, b, c uintptr) Arg { return Arg{kind: typeenc.Struct24, w: [3]uintptr{a, b, c}} }

// scratch is memory for the copies of struct arguments passed by reference
// and for struct results, taken from a pool so that sends do not allocate.
type scratch struct {
	words   [maxWords]uintptr // the words handed to purego.SyscallN
	structs [8][3]uintptr
	ret     [3]uintptr
	super   objcSuper
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// SendArgs sends sel to id with arguments of mixed shapes and returns the
// integer or pointer result.
func SendArgs(id ID, sel SEL, args ...Arg) uintptr {
	fn := lookup(id, sel)
	s := scratchPool.Get().(*scratch)
	n := lower(&s.words, s, 0, id, sel, args)
	r, _, _ := purego.SyscallN(fn, s.words[:n]...)
	runtime.KeepAlive(s)
	scratchPool.Put(s)
	return r
}

// SendStruct24 sends sel to id and returns the method's result, a struct of
// three words (such as MTLSize) that the C convention returns through a
// hidden pointer: the first argument on amd64 (objc_msgSend_stret on
// Apple's runtime), register x8 on arm64. On arm64 its arguments must be
// words ([Word]), at most six; the call goes through purego's
// reflection-based functions, so it is not a hot path there.
func SendStruct24(id ID, sel SEL, args ...Arg) [3]uintptr {
	if runtime.GOARCH == "arm64" {
		return sendStruct24X8(id, sel, args)
	}
	fn := lookupStret(id, sel)
	s := scratchPool.Get().(*scratch)
	s.ret = [3]uintptr{}
	n := lower(&s.words, s, Pointer(&s.ret), id, sel, args)
	purego.SyscallN(fn, s.words[:n]...)
	ret := s.ret
	runtime.KeepAlive(s)
	scratchPool.Put(s)
	return ret
}

// word3 is a 24-byte struct result, for purego's struct-return support.
type word3 struct{ A, B, C uintptr }

// x8Func calls a function with up to six word arguments after the
// receiver and selector and a 24-byte struct result in x8. Extra arguments
// are ignored by the callee under the C convention.
type x8Func func(id ID, sel SEL, a1, a2, a3, a4, a5, a6 uintptr) word3

// f64Func calls a function with up to six word arguments after the receiver
// and selector and a double result.
type f64Func func(id ID, sel SEL, a1, a2, a3, a4, a5, a6 uintptr) float64

// boundFuncs caches functions bound with purego.RegisterFunc by address:
// Apple's runtime has one (objc_msgSend); the GNU runtime one per IMP.
var boundFuncs sync.Map // struct{fn uintptr; kind byte} -> x8Func or f64Func

type boundKey struct {
	fn   uintptr
	kind byte
}

func bound[F any](fn uintptr, kind byte) F {
	k := boundKey{fn, kind}
	if f, ok := boundFuncs.Load(k); ok {
		return f.(F)
	}
	var f F
	purego.RegisterFunc(&f, fn)
	boundFuncs.Store(k, f)
	return f
}

func wordArgs(args []Arg) (a [6]uintptr) {
	for i, x := range args {
		if x.kind != typeenc.Word || i >= len(a) {
			panic("objc: struct-returning and float-returning sends take at most six word arguments")
		}
		a[i] = x.w[0]
	}
	return a
}

func sendStruct24X8(id ID, sel SEL, args []Arg) [3]uintptr {
	a := wordArgs(args)
	f := bound[x8Func](lookupStret(id, sel), 'x')
	r := f(id, sel, a[0], a[1], a[2], a[3], a[4], a[5])
	return [3]uintptr{r.A, r.B, r.C}
}

// SendFloat64 sends sel to id and returns the method's double result (such
// as CFTimeInterval), which the C convention returns in a floating-point
// register. It takes at most six word arguments. It is not a hot path: it
// goes through purego's reflection-based calls.
func SendFloat64(id ID, sel SEL, args ...uintptr) float64 {
	var a [6]uintptr
	if len(args) > len(a) {
		panic("objc: SendFloat64 takes at most six arguments")
	}
	copy(a[:], args)
	f := bound[f64Func](lookup(id, sel), 'f')
	return f(id, sel, a[0], a[1], a[2], a[3], a[4], a[5])
}

// objcSuper is struct objc_super: the receiver and the class whose
// superclass's implementation is wanted (both runtimes use this layout,
// with super_class naming the class where the search starts).
type objcSuper struct {
	receiver   ID
	superClass Class
}

// SendSuper sends sel to id, starting the method search at class super
// (usually the superclass of the class that implements the caller), as
// [super sel] does in Objective-C, and returns the object the method
// returns (as [Send] does).
func SendSuper(id ID, super Class, sel SEL, args ...uintptr) ID {
	// The objc_super is passed by address as a plain word, so it must not
	// live on the goroutine stack, which may move before the call: it is
	// kept in the scratch memory, which is on the heap.
	s := scratchPool.Get().(*scratch)
	s.super = objcSuper{receiver: id, superClass: super}
	fn, recv := lookupSuper(&s.super, sel)
	s.words[0], s.words[1] = recv, uintptr(sel)
	n := 2 + copy(s.words[2:], args)
	r, _, _ := purego.SyscallN(fn, s.words[:n]...)
	runtime.KeepAlive(s)
	scratchPool.Put(s)
	return ID(r)
}

// Pointer returns p as a send argument, moving the memory it points to
// onto the heap. A send passes pointers as integers, which the compiler's
// escape analysis cannot follow: memory on the goroutine's stack would stay
// there, and a method implemented in Go (the emulated device's methods)
// runs on that stack and may grow it, which moves the stack while C holds
// the old address. Heap memory does not move. The caller keeps the memory
// alive until the send returns (runtime.KeepAlive, or a later use).
func Pointer[T any](p *T) uintptr {
	if pointerSinkOn {
		pointerSink = unsafe.Pointer(p)
	}
	return uintptr(unsafe.Pointer(p))
}

// pointerSink is where [Pointer] would store its argument: escape analysis
// sees the store and moves the argument to the heap; pointerSinkOn is never
// set, so the store never happens.
var (
	pointerSinkOn bool
	//lint:ignore U1000 written, never read: the store is what makes the argument escape
	pointerSink unsafe.Pointer
)
