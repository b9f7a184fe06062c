package objc

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// size24 and range16 are MTLSize and NSRange as a Go method receives them.
type size24 struct{ A, B, C uint64 }
type range16 struct{ A, B uint64 }

// An abiCase is one method shape: its selector and type encoding, its Go
// implementation, the C function of testdata/abi.c implementing it, and
// random arguments for it.
type abiCase struct {
	sel   string
	types string
	goFn  any
	cFn   string
	args  func(r *rand.Rand) []Arg
}

func words(r *rand.Rand, n int) []Arg {
	a := make([]Arg, n)
	for i := range a {
		a[i] = Word(randomWord(r))
	}
	return a
}

func s16(r *rand.Rand) Arg { return Struct16(randomWord(r), randomWord(r)) }
func s24(r *rand.Rand) Arg { return Struct24(randomWord(r), randomWord(r), randomWord(r)) }

func cat(parts ...[]Arg) []Arg {
	var a []Arg
	for _, p := range parts {
		a = append(a, p...)
	}
	return a
}

const (
	mtlSize = "{MTLSize=QQQ}"
	nsRange = "{_NSRange=QQ}"
)

var abiCases = []abiCase{{
	sel:   "wordsA:b:c:d:e:f:g:h:i:j:",
	types: "Q@:QQQQQQQQQQ",
	goFn: func(self ID, sel SEL, a, b, c, d, e, f, g, h, i, j uint64) uint64 {
		return goRecord(self, sel, a, b, c, d, e, f, g, h, i, j)
	},
	cFn:  "pm_words",
	args: func(r *rand.Rand) []Arg { return words(r, 10) },
}, {
	sel:   "range:word:",
	types: "Q@:" + nsRange + "Q",
	goFn: func(self ID, sel SEL, rg range16, a uint64) uint64 {
		return goRecord(self, sel, rg.A, rg.B, a)
	},
	cFn:  "pm_range",
	args: func(r *rand.Rand) []Arg { return cat([]Arg{s16(r)}, words(r, 1)) },
}, {
	sel:   "mixedWord:size:range:size:word:",
	types: "Q@:Q" + mtlSize + nsRange + mtlSize + "Q",
	goFn: func(self ID, sel SEL, a uint64, s size24, rg range16, u size24, b uint64) uint64 {
		return goRecord(self, sel, a, s.A, s.B, s.C, rg.A, rg.B, u.A, u.B, u.C, b)
	},
	cFn: "pm_mixed",
	args: func(r *rand.Rand) []Arg {
		return cat(words(r, 1), []Arg{s24(r), s16(r), s24(r)}, words(r, 1))
	},
}, {
	sel:   "dispatchGrid:group:a:b:c:d:e:f:g:",
	types: "Q@:" + mtlSize + mtlSize + "QQQQQQQ",
	goFn: func(self ID, sel SEL, grid, group size24, a, b, c, d, e, f, g uint64) uint64 {
		return goRecord(self, sel, grid.A, grid.B, grid.C, group.A, group.B, group.C, a, b, c, d, e, f, g)
	},
	cFn:  "pm_dispatch",
	args: func(r *rand.Rand) []Arg { return cat([]Arg{s24(r), s24(r)}, words(r, 7)) },
}, {
	sel:   "late24A:b:c:d:e:f:size:g:range:",
	types: "Q@:QQQQQQ" + mtlSize + "Q" + nsRange,
	goFn: func(self ID, sel SEL, a, b, c, d, e, f uint64, s size24, g uint64, rg range16) uint64 {
		return goRecord(self, sel, a, b, c, d, e, f, s.A, s.B, s.C, g, rg.A, rg.B)
	},
	cFn:  "pm_size_late",
	args: func(r *rand.Rand) []Arg { return cat(words(r, 6), []Arg{s24(r)}, words(r, 1), []Arg{s16(r)}) },
}, {
	// amd64: one register left for the range.
	sel:   "late3A:b:c:range:d:e:",
	types: "Q@:QQQ" + nsRange + "QQ",
	goFn: func(self ID, sel SEL, a, b, c uint64, rg range16, d, e uint64) uint64 {
		return goRecord(self, sel, a, b, c, rg.A, rg.B, d, e)
	},
	cFn:  "pm_range_late3",
	args: func(r *rand.Rand) []Arg { return cat(words(r, 3), []Arg{s16(r)}, words(r, 2)) },
}, {
	// arm64: one register left for the range.
	sel:   "late5A:b:c:d:e:range:f:",
	types: "Q@:QQQQQ" + nsRange + "Q",
	goFn: func(self ID, sel SEL, a, b, c, d, e uint64, rg range16, f uint64) uint64 {
		return goRecord(self, sel, a, b, c, d, e, rg.A, rg.B, f)
	},
	cFn:  "pm_range_late5",
	args: func(r *rand.Rand) []Arg { return cat(words(r, 5), []Arg{s16(r)}, words(r, 1)) },
}}

// Methods with other results, implemented both in Go and in C.
var (
	sizeMethod = abiCase{
		sel:   "sizeA:b:c:",
		types: mtlSize + "@:QQQ",
		goFn: func(self ID, sel SEL, a, b, c uint64) size24 {
			goRecord(self, sel, a, b, c)
			return size24{a*3 + 1, b ^ c, c - a}
		},
		cFn: "pm_size",
	}
	boolMethod = abiCase{
		sel:   "boolFrom:",
		types: "c@:Q",
		goFn: func(self ID, sel SEL, v uint64) uint64 {
			goRecord(self, sel, v)
			return v // the whole word: bits above the low byte included
		},
		cFn: "pm_bool",
	}
)

// ratioSel is a double-returning method, implemented in C only: a Go
// callback cannot return a double.
const ratioSel = "ratioA:b:"

// abiImpl is one implementation of the test methods: a class and how to
// read the words its last method received.
type abiImpl struct {
	name string
	cls  Class
	seen func(t testing.TB) []uint64
}

var goABI, cABI onceClass

// allABICases are abiCases and the methods of the size and bool checks.
func allABICases() []abiCase {
	return append(abiCases[:len(abiCases):len(abiCases)], sizeMethod, boolMethod)
}

// goABIClass is the class whose methods are the Go functions of abiCases.
func goABIClass(t testing.TB) abiImpl {
	t.Helper()
	cls := goABI.get(t, "PMTestGoABI", rootClass(t), func() []Method {
		var ms []Method
		for _, c := range allABICases() {
			if !goCallbackUnsupported(c) {
				ms = append(ms, Method{Sel: c.sel, Fn: c.goFn, Types: c.types})
			}
		}
		return ms
	})
	return abiImpl{"Go", cls, func(testing.TB) []uint64 { return goLastSeen() }}
}

// cABIClass is the class whose methods are the C functions of
// testdata/abi.c, compiled by clang for the test's architecture.
func cABIClass(t testing.TB) abiImpl {
	t.Helper()
	loadCLib(t)
	cls := cABI.get(t, "PMTestCABI", rootClass(t), func() []Method {
		var ms []Method
		for _, c := range allABICases() {
			ms = append(ms, Method{Sel: c.sel, IMP: IMP(cSymbol(t, c.cFn)), Types: c.types})
		}
		return append(ms, Method{Sel: ratioSel, IMP: IMP(cSymbol(t, "pm_ratio")), Types: "d@:QQ"})
	})
	return abiImpl{"C", cls, cSeen}
}

func abiImpls(t *testing.T) []abiImpl {
	return []abiImpl{goABIClass(t), cABIClass(t)}
}

// eachImpl runs f as a subtest for the Go methods and for the C methods,
// so that a missing clang skips only the second.
func eachImpl(t *testing.T, f func(t *testing.T, impl abiImpl)) {
	for _, m := range []struct {
		name string
		make func(testing.TB) abiImpl
	}{{"Go", goABIClass}, {"C", cABIClass}} {
		t.Run(m.name, func(t *testing.T) { f(t, m.make(t)) })
	}
}

// TestSendArgs sends every argument shape to methods implemented in Go
// (purego callbacks) and in C (compiled by clang), and checks each method
// received every word in its place and its digest came back.
func TestSendArgs(t *testing.T) {
	needRuntime(t)
	r := rand.New(rand.NewPCG(1, 2))
	eachImpl(t, func(t *testing.T, impl abiImpl) {
		obj, dispose := newInstance(t, impl.cls)
		for _, c := range abiCases {
			if impl.name == "Go" && goCallbackUnsupported(c) {
				t.Logf("Go %s: not registered on %s, where purego callbacks misread it (the C method checks this shape)", c.sel, runtime.GOARCH)
				continue
			}
			sel := RegisterName(c.sel)
			for range 4 {
				args := c.args(r)
				want := append([]uint64{uint64(obj), uint64(sel)}, flatten(args)...)
				got := SendArgs(obj, sel, args...)
				if !sameWords(t, impl.name+" "+c.sel, impl.seen(t), want) {
					break
				}
				if uint64(got) != digest(want) {
					t.Errorf("%s %s returned %#x, want the digest %#x", impl.name, c.sel, got, digest(want))
				}
			}
		}
		dispose()
	})
}

// TestSendWords checks the word-only hot path, SendWord, with arguments that
// spill to the stack, and the ID and Class method forms.
func TestSendWords(t *testing.T) {
	needRuntime(t)
	r := rand.New(rand.NewPCG(3, 4))
	sel := RegisterName(abiCases[0].sel)
	eachImpl(t, func(t *testing.T, impl abiImpl) {
		obj, dispose := newInstance(t, impl.cls)
		for n := range 3 {
			var a [10]uintptr
			for i := range a {
				a[i] = randomWord(r)
			}
			var got uintptr
			switch n {
			case 0:
				got = SendWord(obj, sel, a[:]...)
			case 1:
				got = obj.SendWord(sel, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9])
			case 2:
				if got := obj.Send(RegisterName("class")); got != ID(impl.cls) {
					t.Errorf("%s: [obj class] = %#x, want the class %#x", impl.name, got, impl.cls)
				}
				if got := obj.Class(); got != impl.cls {
					t.Errorf("%s: object_getClass(obj) = %#x, want the class %#x", impl.name, got, impl.cls)
				}
				continue
			}
			want := []uint64{uint64(obj), uint64(sel)}
			for _, w := range a {
				want = append(want, uint64(w))
			}
			sameWords(t, impl.name+" Send", impl.seen(t), want)
			if uint64(got) != digest(want) {
				t.Errorf("%s Send returned %#x, want the digest %#x", impl.name, got, digest(want))
			}
		}
		dispose()
	})
}

// TestSendStruct24 checks a 24-byte struct result (MTLSize), returned
// through the hidden pointer, with word arguments.
func TestSendStruct24(t *testing.T) {
	needRuntime(t)
	r := rand.New(rand.NewPCG(5, 6))
	sel := RegisterName(sizeMethod.sel)
	eachImpl(t, func(t *testing.T, impl abiImpl) {
		obj, dispose := newInstance(t, impl.cls)
		for range 4 {
			a, b, c := randomWord(r), randomWord(r), randomWord(r)
			got := SendStruct24(obj, sel, Word(a), Word(b), Word(c))
			sameWords(t, impl.name+" "+sizeMethod.sel, impl.seen(t), []uint64{uint64(obj), uint64(sel), uint64(a), uint64(b), uint64(c)})
			want := [3]uintptr{a*3 + 1, b ^ c, c - a}
			if got != want {
				t.Errorf("%s %s(%#x, %#x, %#x) = %#x, want %#x", impl.name, sizeMethod.sel, a, b, c, got, want)
			}
		}
		dispose()
	})
}

// TestSendBool checks that a BOOL result is read from the low byte only:
// the C convention leaves the rest of the register undefined.
func TestSendBool(t *testing.T) {
	needRuntime(t)
	sel := RegisterName(boolMethod.sel)
	eachImpl(t, func(t *testing.T, impl abiImpl) {
		obj, dispose := newInstance(t, impl.cls)
		for _, c := range []struct {
			v    uintptr
			want bool
		}{
			{0x100, false}, {0xff00, false}, {0xdeadbeef00, false}, {1 << 63, false},
			{0x1, true}, {0x101, true}, {0xff, true}, {0xdeadbeef80, true},
		} {
			if got := SendBool(obj, sel, c.v); got != c.want {
				t.Errorf("%s: BOOL method returning the word %#x read as %v, want %v", impl.name, c.v, got, c.want)
			}
			sameWords(t, impl.name+" "+boolMethod.sel, impl.seen(t), []uint64{uint64(obj), uint64(sel), uint64(c.v)})
		}
		dispose()
	})
}

// TestSendFloat64 checks a double result, from a C method.
func TestSendFloat64(t *testing.T) {
	needRuntime(t)
	r := rand.New(rand.NewPCG(7, 8))
	impl := cABIClass(t)
	obj, dispose := newInstance(t, impl.cls)
	defer dispose()
	sel := RegisterName(ratioSel)
	for range 8 {
		a, b := randomWord(r)>>11, randomWord(r)>>40|1
		got := SendFloat64(obj, sel, a, b)
		if want := float64(a) / float64(b); got != want {
			t.Errorf("%s(%d, %d) = %v, want %v", ratioSel, a, b, got, want)
		}
		sameWords(t, "C "+ratioSel, cSeen(t), []uint64{uint64(obj), uint64(sel), uint64(a), uint64(b)})
	}
}

// goCallbackUnsupported reports whether RegisterClass refuses the Go
// implementation of c on this architecture.
func goCallbackUnsupported(c abiCase) bool {
	return runtime.GOARCH == "arm64" && arm64StackStructHazard(reflect.TypeOf(c.goFn)) >= 0
}

// TestArm64StackStructHazard checks which Go method signatures are
// refused on arm64: those with integer arguments after a 16-byte struct
// that went on the stack with a register still free.
func TestArm64StackStructHazard(t *testing.T) {
	needRuntime(t)
	want := map[string]int{
		"wordsA:b:c:d:e:f:g:h:i:j:":         -1,
		"range:word:":                       -1,
		"mixedWord:size:range:size:word:":   -1,
		"dispatchGrid:group:a:b:c:d:e:f:g:": -1,
		"late24A:b:c:d:e:f:size:g:range:":   -1,
		"late3A:b:c:range:d:e:":             -1,
		"late5A:b:c:d:e:range:f:":           8,
	}
	for _, c := range abiCases {
		if got := arm64StackStructHazard(reflect.TypeOf(c.goFn)); got != want[c.sel] {
			t.Errorf("arm64StackStructHazard(%s) = %d, want %d", c.sel, got, want[c.sel])
		}
	}
	// Six words leave no register for the range: nothing is misread.
	full := func(self ID, sel SEL, a, b, c, d, e, f uint64, rg range16, g uint64) uint64 { return 0 }
	if got := arm64StackStructHazard(reflect.TypeOf(full)); got != -1 {
		t.Errorf("arm64StackStructHazard(six words, range, word) = %d, want -1", got)
	}
	// A double after the spilled range is in a floating-point register.
	float := func(self ID, sel SEL, a, b, c, d, e uint64, rg range16, f float64) uint64 { return 0 }
	if got := arm64StackStructHazard(reflect.TypeOf(float)); got != -1 {
		t.Errorf("arm64StackStructHazard(five words, range, double) = %d, want -1", got)
	}
}

// TestRegisterClassErrors checks that bad methods are errors that name the
// class and the method, not panics.
func TestRegisterClassErrors(t *testing.T) {
	needRuntime(t)
	root := rootClass(t)
	for i, c := range []struct {
		fn   any
		want string
	}{
		{42, "not a function"},
		{func(a, b string) {}, "first two parameters"},
		{func(self ID) {}, "first two parameters"},
		{func(self ID, sel SEL, s string) {}, "unsupported argument type"},
		{func(self ID, sel SEL) (uintptr, uintptr) { return 0, 0 }, "one return"},
	} {
		name := "PMTestBadClass" + string(rune('A'+i))
		_, err := RegisterClass(name, root, []Method{{Sel: "bad:", Fn: c.fn, Types: "v@:"}})
		if err == nil {
			t.Errorf("RegisterClass with Fn %T returned no error", c.fn)
			continue
		}
		for _, w := range []string{name, `"bad:"`, c.want} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("RegisterClass with Fn %T: error %q does not mention %q", c.fn, err, w)
			}
		}
	}
	if runtime.GOARCH == "arm64" {
		late5 := abiCases[len(abiCases)-1]
		_, err := RegisterClass("PMTestBadLate5", root, []Method{{Sel: late5.sel, Fn: late5.goFn, Types: late5.types}})
		if err == nil || !strings.Contains(err.Error(), "parameter 8") {
			t.Errorf("RegisterClass with %s on arm64: error %v, want one naming parameter 8", late5.sel, err)
		}
	}
	if _, err := RegisterClass("PMTestNoSuper", 0, nil); err == nil || !strings.Contains(err.Error(), "superclass") {
		t.Errorf("RegisterClass without a superclass: error %v, want one about the superclass", err)
	}
	if _, err := RegisterClass(root.Name(), root, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("RegisterClass(%q): error %v, want one saying it already exists", root.Name(), err)
	}
}
