package objc

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/internal/typeenc"
)

// A lowerCase is one method shape whose lowering is compared with clang's:
// its result and its argument kinds, receiver and selector included.
type lowerCase struct {
	name   string
	result typeenc.Kind
	args   []typeenc.Kind
}

const (
	kObj = typeenc.Object
	kW   = typeenc.Word
	kI32 = typeenc.Int32
	kI16 = typeenc.Int16
	kI8  = typeenc.Int8
	kS16 = typeenc.Struct16
	kS24 = typeenc.Struct24
)

func withSelf(args ...typeenc.Kind) []typeenc.Kind {
	return append([]typeenc.Kind{kObj, kW}, args...)
}

var lowerCases = []lowerCase{
	{"words10", kW, withSelf(kW, kW, kW, kW, kW, kW, kW, kW, kW, kW)},
	// dispatchThreadgroups:threadsPerThreadgroup:, then words that spill.
	{"twoSizes", typeenc.Void, withSelf(kS24, kS24)},
	{"twoSizesWords", typeenc.Void, withSelf(kS24, kS24, kW, kW, kW, kW, kW, kW, kW)},
	// amd64: one register left, the NSRange goes on the stack and the
	// next word still takes r9.
	{"rangeSpillsAmd64", kW, withSelf(kW, kW, kW, kS16, kW, kW)},
	// arm64: one register left, the NSRange goes on the stack and so does
	// every later argument (C.13).
	{"rangeSpillsArm64", kW, withSelf(kW, kW, kW, kW, kW, kS16, kW)},
	{"mixed", kW, withSelf(kW, kS24, kS16, kS24, kW)},
	// arm64: the pointer to the MTLSize copy goes on the stack.
	{"late24", kW, withSelf(kW, kW, kW, kW, kW, kW, kS24, kW, kS16)},
	// setBuffers:offsets:withRange:.
	{"setBuffers", typeenc.Void, withSelf(kW, kW, kS16)},
	// maxThreadsPerThreadgroup: a struct result in memory.
	{"sizeResult", kS24, withSelf(kW, kW, kW)},
	{"sizeResultSpills", kS24, withSelf(kW, kW, kW, kW, kW, kW, kW)},
	{"rangeResult", kS16, withSelf(kW)},
	// GPUStartTime: a double result.
	{"doubleResult", typeenc.Double, withSelf(kW, kW)},
	{"boolResult", kI8, withSelf(kW)},
	// Sub-word arguments: in registers they take a whole register; on the
	// stack a whole 8-byte slot, except on Apple arm64, which packs them.
	{"subWordRegs", kW, withSelf(kI8, kI16, kI32, kW)},
	{"subWordStack", kW, withSelf(kW, kW, kW, kW, kW, kW, kI8, kI8, kI32, kW, kI16)},
}

// A lowering is one platform's convention, as package objc models it, and
// the clang target that implements it.
type lowering struct {
	target string
	arm64  bool
	lower  func(kinds []typeenc.Kind, stret bool, out []place) (int, error)
}

var lowerings = []lowering{
	{"arm64-apple-macos13", true, func(k []typeenc.Kind, _ bool, out []place) (int, error) { return lowerArm64Apple(k, out) }},
	{"x86_64-apple-macos13", false, lowerAmd64},
	{"aarch64-linux-gnu", true, func(k []typeenc.Kind, _ bool, out []place) (int, error) { return lowerArm64(k, out) }},
	{"x86_64-linux-gnu", false, lowerAmd64},
}

// TestLowerAgainstClang compiles, for each platform, a C function of
// every shape of lowerCases that stores each argument into its own global
// variable, and reads from clang's assembly where each argument arrives:
// which register, which stack offset, or through which pointer. Each must
// be where the lowering functions put it, and the result where they say
// it is returned.
func TestLowerAgainstClang(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		testenv.SkipOrFail(t, "clang not found: the lowering is checked against clang's (apt-get install clang)")
	}
	src := lowerSource()
	for _, l := range lowerings {
		t.Run(l.target, func(t *testing.T) {
			cmd := exec.Command(clang, "--target="+l.target, "-O2", "-fomit-frame-pointer", "-ffreestanding", "-S", "-o", "-", "-x", "c", "-")
			cmd.Stdin = strings.NewReader(src)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("clang --target=%s: %v\n%s", l.target, err, out)
			}
			funcs := splitFunctions(string(out), l.arm64)
			for _, c := range lowerCases {
				body, ok := funcs["case_"+c.name]
				if !ok {
					t.Errorf("%s: no function case_%s in clang's output", l.target, c.name)
					continue
				}
				var seen observed
				if l.arm64 {
					seen = parseArm64(t, body)
				} else {
					seen = parseAmd64(t, body)
				}
				checkCase(t, l, c, seen)
			}
		})
	}
}

func cType(k typeenc.Kind) string {
	switch k {
	case typeenc.Void:
		return "void"
	case kObj:
		return "void *"
	case kW:
		return "u64"
	case kI32:
		return "unsigned int"
	case kI16:
		return "unsigned short"
	case kI8:
		return "unsigned char"
	case kS16:
		return "struct S16"
	case kS24:
		return "struct S24"
	case typeenc.Double:
		return "double"
	}
	panic(k)
}

// Argument i, word j, is stored to g8[3*i+j]; a sub-word argument i to
// g4[i], g2[i] or g1[i].
func lowerSource() string {
	var b strings.Builder
	b.WriteString(`typedef unsigned long long u64;
struct S16 { u64 a, b; };
struct S24 { u64 a, b, c; };
static volatile u64 g8[3 * 32];
static volatile unsigned int g4[32];
static volatile unsigned short g2[32];
static volatile unsigned char g1[32];
static volatile u64 gr[3];
static volatile unsigned char gb;
static volatile double gd;
`)
	for _, c := range lowerCases {
		var params, body []string
		for i, k := range c.args {
			params = append(params, fmt.Sprintf("%s a%d", cType(k), i))
			switch k {
			case kObj, kW:
				body = append(body, fmt.Sprintf("g8[%d] = (u64)a%d;", 3*i, i))
			case kI32:
				body = append(body, fmt.Sprintf("g4[%d] = a%d;", i, i))
			case kI16:
				body = append(body, fmt.Sprintf("g2[%d] = a%d;", i, i))
			case kI8:
				body = append(body, fmt.Sprintf("g1[%d] = a%d;", i, i))
			case kS16:
				body = append(body, fmt.Sprintf("g8[%d] = a%d.a; g8[%d] = a%d.b;", 3*i, i, 3*i+1, i))
			case kS24:
				body = append(body, fmt.Sprintf("g8[%d] = a%d.a; g8[%d] = a%d.b; g8[%d] = a%d.c;", 3*i, i, 3*i+1, i, 3*i+2, i))
			}
		}
		switch c.result {
		case kW:
			body = append(body, "return gr[0];")
		case kI8:
			body = append(body, "return gb;")
		case kS16:
			body = append(body, "struct S16 r = {gr[0], gr[1]}; return r;")
		case kS24:
			body = append(body, "struct S24 r = {gr[0], gr[1], gr[2]}; return r;")
		case typeenc.Double:
			body = append(body, "return gd;")
		}
		fmt.Fprintf(&b, "%s case_%s(%s) {\n\t%s\n}\n", cType(c.result), c.name, strings.Join(params, ", "), strings.Join(body, "\n\t"))
	}
	return b.String()
}

// splitFunctions returns the instructions of each function of an assembly
// listing, by name (without Mach-O's leading underscore).
func splitFunctions(asm string, arm64 bool) map[string][]string {
	comment := "#" // AT&T syntax
	if arm64 {
		comment = ";" // Mach-O arm64; ELF arm64 uses //
	}
	out := map[string][]string{}
	var cur string
	label := regexp.MustCompile(`^_?([A-Za-z_][A-Za-z0-9_]*):`)
	for _, line := range strings.Split(asm, "\n") {
		if m := label.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "L") && !strings.HasPrefix(line, ".") {
			cur = m[1]
			continue
		}
		for _, c := range []string{comment, "//"} {
			if i := strings.Index(line, c); i >= 0 {
				line = line[:i]
			}
		}
		line = strings.TrimSpace(line)
		if cur == "" || line == "" || strings.HasPrefix(line, ".") || strings.HasSuffix(line, ":") {
			continue
		}
		out[cur] = append(out[cur], line)
	}
	return out
}

// An origin is where a value the function stores came from.
type origin struct {
	kind string // "reg" (an argument register), "stack", "deref" (through a pointer), "global" (an address of a variable)
	n    int    // register number, or stack offset at the call
	// for deref: the pointer's own origin and the offset from it
	ptr *origin
	sym string // for global: the variable
}

func (o origin) String() string {
	switch o.kind {
	case "reg":
		return fmt.Sprintf("reg %d", o.n)
	case "stack":
		return fmt.Sprintf("stack+%d", o.n)
	case "deref":
		return fmt.Sprintf("[%v]+%d", *o.ptr, o.n)
	case "global":
		return fmt.Sprintf("&%s+%d", o.sym, o.n)
	}
	return "?"
}

// observed is what the function did: the origin of each value stored to
// the globals (by variable and byte offset), the registers loaded from the
// result variables, and the stores through a pointer argument (a struct
// result in memory).
type observed struct {
	stored       map[string]origin // "g8+16" -> origin
	resultRegs   map[string]bool   // "x0", "d0", "rax", "xmm0", ...
	memoryStores map[int]bool      // argument register numbers stored through
	returnsArg   map[int]bool      // amd64: argument registers copied to rax
}

func newObserved() observed {
	return observed{map[string]origin{}, map[string]bool{}, map[int]bool{}, map[int]bool{}}
}

var (
	arm64Mem  = regexp.MustCompile(`^\[(\w+)(?:, (#-?\d+|[^\]]+))?\](!?)$`)
	arm64Sym  = regexp.MustCompile(`^(?:_|:lo12:)?([A-Za-z_]\w*?)(?:@PAGE(?:OFF)?)?(?:\+(\d+))?$`)
	arm64Regs = regexp.MustCompile(`^([xwbhsdq])(\d+)$`)
)

// argumentRegisters are the registers at a function's entry: the first n,
// by number, hold the arguments.
func argumentRegisters(n int) map[int]origin {
	regs := map[int]origin{}
	for i := range n {
		regs[i] = origin{kind: "reg", n: i}
	}
	return regs
}

// parseArm64 follows the function's data flow: registers start as the
// argument registers, loads from the stack or through a pointer give
// their values an origin, and stores to the globals record it.
func parseArm64(t *testing.T, body []string) observed {
	t.Helper()
	obs := newObserved()
	regs := argumentRegisters(9)
	spDelta := 0
	regOf := func(s string) (n int, width string, ok bool) {
		if s == "sp" {
			return -1, "x", true
		}
		m := arm64Regs.FindStringSubmatch(s)
		if m == nil {
			return 0, "", false
		}
		n, _ = strconv.Atoi(m[2])
		return n, m[1], true
	}
	// address resolves a memory operand to the origin of its base (sp, a
	// register's value or a global variable) and the offset from it.
	address := func(ins, op string) (base origin, off int) {
		m := arm64Mem.FindStringSubmatch(op)
		if m == nil || m[3] != "" {
			t.Fatalf("cannot read %q", ins)
		}
		r, _, ok := regOf(m[1])
		if !ok {
			t.Fatalf("cannot read %q", ins)
		}
		if r == -1 {
			base = origin{kind: "sp"}
		} else {
			base = regs[r]
		}
		switch {
		case m[2] == "":
		case strings.HasPrefix(m[2], "#"):
			off, _ = strconv.Atoi(m[2][1:])
		default:
			s := arm64Sym.FindStringSubmatch(m[2])
			if s == nil {
				t.Fatalf("cannot read %q", ins)
			}
			off, _ = strconv.Atoi(s[2])
			base = origin{kind: "global", sym: s[1]}
		}
		if base.kind == "global" {
			base.n, off = 0, base.n+off
		}
		return base, off
	}
	for _, ins := range body {
		op, rest, _ := strings.Cut(ins, "\t")
		if rest == "" {
			op, rest, _ = strings.Cut(ins, " ")
		}
		operands := splitOperands(rest)
		pair := strings.HasPrefix(op, "ldp") || strings.HasPrefix(op, "stp")
		nregs := 1
		if pair {
			nregs = 2
		}
		switch {
		case op == "ret":
		case (op == "sub" || op == "add") && len(operands) == 3 && operands[0] == "sp":
			n, _ := strconv.Atoi(strings.TrimPrefix(operands[2], "#"))
			if op == "add" {
				n = -n
			}
			spDelta += n
		case op == "adrp" || op == "add" && len(operands) == 3 && !strings.HasPrefix(operands[2], "#"):
			d, _, _ := regOf(operands[0])
			s := arm64Sym.FindStringSubmatch(operands[len(operands)-1])
			if s == nil {
				t.Fatalf("cannot read %q", ins)
			}
			k, _ := strconv.Atoi(s[2])
			regs[d] = origin{kind: "global", sym: s[1], n: k}
		case op == "mov" && len(operands) == 2:
			d, _, _ := regOf(operands[0])
			if s, _, ok := regOf(operands[1]); ok && s >= 0 {
				regs[d] = regs[s]
			} else {
				regs[d] = origin{kind: "const"}
			}
		case strings.HasPrefix(op, "ldr") || strings.HasPrefix(op, "ldp") || strings.HasPrefix(op, "ldur"):
			base, off := address(ins, operands[nregs])
			for j := range nregs {
				d, width, _ := regOf(operands[j])
				size := 8
				if width == "w" || width == "s" {
					size = 4
				}
				var o origin
				switch base.kind {
				case "sp":
					o = origin{kind: "stack", n: off - spDelta + j*size}
				case "global":
					o = origin{kind: "globalValue", sym: base.sym, n: off + j*size}
					if isResultVar(base.sym) {
						obs.resultRegs[fmt.Sprintf("%s%d", width, d)] = true
					}
				default:
					p := base
					o = origin{kind: "deref", ptr: &p, n: off + j*size}
				}
				regs[d] = o
			}
		case strings.HasPrefix(op, "str") || strings.HasPrefix(op, "stp") || strings.HasPrefix(op, "stur"):
			base, off := address(ins, operands[nregs])
			for j := range nregs {
				s, width, _ := regOf(operands[j])
				size := map[string]int{"strb": 1, "strh": 2, "sturb": 1, "sturh": 2}[op]
				if size == 0 {
					size = 8
					if width == "w" {
						size = 4
					}
				}
				switch base.kind {
				case "global":
					obs.stored[fmt.Sprintf("%s+%d", base.sym, off+j*size)] = regs[s]
				case "reg":
					obs.memoryStores[base.n] = true
				}
			}
		default:
			// Other instructions (extensions, arithmetic) would make the
			// data flow unreadable: the C code needs none.
			t.Fatalf("unexpected instruction %q", ins)
		}
	}
	return obs
}

// isResultVar reports whether sym is one of the variables the functions
// return from.
func isResultVar(sym string) bool { return sym == "gr" || sym == "gb" || sym == "gd" }

func splitOperands(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// amd64ArgRegs numbers the general registers by every name of each: the
// System V argument registers 0 to 5 in their order, then rax (6) and the
// others.
var amd64ArgRegs = func() map[string]int {
	m := map[string]int{}
	for i, names := range [][]string{
		{"rdi", "edi", "di", "dil"}, {"rsi", "esi", "si", "sil"}, {"rdx", "edx", "dx", "dl"},
		{"rcx", "ecx", "cx", "cl"}, {"r8", "r8d", "r8w", "r8b"}, {"r9", "r9d", "r9w", "r9b"},
		{"rax", "eax", "ax", "al"}, {"r10", "r10d", "r10w", "r10b"}, {"r11", "r11d", "r11w", "r11b"},
		{"rbx", "ebx", "bx", "bl"}, {"r12", "r12d", "r12w", "r12b"}, {"r13", "r13d", "r13w", "r13b"},
		{"r14", "r14d", "r14w", "r14b"}, {"r15", "r15d", "r15w", "r15b"}, {"rbp", "ebp", "bp", "bpl"},
	} {
		for _, n := range names {
			m[n] = i
		}
	}
	return m
}()

var amd64Mem = regexp.MustCompile(`^(?:_?([A-Za-z_]\w*)(?:\+(\d+))?|(-?\d+))?\(%(\w+)\)$`)

// parseAmd64 is parseArm64 for AT&T-syntax x86-64 assembly.
func parseAmd64(t *testing.T, body []string) observed {
	t.Helper()
	obs := newObserved()
	regs := argumentRegisters(6)
	for i := 6; i < 15; i++ {
		regs[i] = origin{kind: "const"}
	}
	// At entry the return address is at 0(%rsp): the caller's stack
	// arguments start at 8.
	spDelta := 8
	for _, ins := range body {
		op, rest, _ := strings.Cut(ins, "\t")
		if rest == "" {
			op, rest, _ = strings.Cut(ins, " ")
		}
		operands := splitOperands(rest)
		switch {
		case op == "retq" || op == "ret":
			continue
		case op == "pushq":
			spDelta += 8
			continue
		case op == "popq":
			spDelta -= 8
			if d, ok := amd64ArgRegs[strings.TrimPrefix(rest, "%")]; ok {
				regs[d] = origin{kind: "const"}
			}
			continue
		}
		if len(operands) != 2 {
			t.Fatalf("unexpected instruction %q", ins)
		}
		src, dst := operands[0], operands[1]
		if !strings.HasPrefix(op, "mov") {
			t.Fatalf("unexpected instruction %q", ins)
		}
		switch {
		case strings.HasPrefix(src, "%") && strings.HasPrefix(dst, "%"):
			s, sok := amd64ArgRegs[src[1:]]
			d, dok := amd64ArgRegs[dst[1:]]
			if !sok || !dok {
				t.Fatalf("cannot read %q", ins)
			}
			regs[d] = regs[s]
			if d == 6 && regs[s].kind == "reg" {
				obs.returnsArg[regs[s].n] = true
			}
		case strings.HasPrefix(src, "%"):
			m := amd64Mem.FindStringSubmatch(dst)
			s, ok := amd64ArgRegs[src[1:]]
			if m == nil || !ok {
				t.Fatalf("cannot read %q", ins)
			}
			if m[4] == "rip" {
				k, _ := strconv.Atoi(m[2])
				obs.stored[fmt.Sprintf("%s+%d", m[1], k)] = regs[s]
			} else if b, ok := amd64ArgRegs[m[4]]; ok && regs[b].kind == "reg" {
				obs.memoryStores[regs[b].n] = true
			}
		default:
			m := amd64Mem.FindStringSubmatch(src)
			d, ok := amd64ArgRegs[strings.TrimPrefix(dst, "%")]
			if m == nil {
				t.Fatalf("cannot read %q", ins)
			}
			if !ok {
				if strings.HasPrefix(dst, "%xmm") && isResultVar(m[1]) {
					obs.resultRegs[dst[1:]] = true
					continue
				}
				t.Fatalf("cannot read %q", ins)
			}
			switch {
			case m[4] == "rsp":
				off, _ := strconv.Atoi(m[3])
				regs[d] = origin{kind: "stack", n: off - spDelta}
			case m[4] == "rip":
				regs[d] = origin{kind: "globalValue", sym: m[1]}
				if isResultVar(m[1]) {
					obs.resultRegs[strings.TrimPrefix(dst, "%")] = true
				}
			default:
				b := amd64ArgRegs[m[4]]
				p := regs[b]
				off, _ := strconv.Atoi(m[3])
				regs[d] = origin{kind: "deref", ptr: &p, n: off}
			}
		}
	}
	return obs
}

// checkCase compares where clang put each argument of c, and the result,
// with where the lowering functions put them.
func checkCase(t *testing.T, l lowering, c lowerCase, seen observed) {
	t.Helper()
	places := make([]place, len(c.args))
	stret := c.result == kS24
	if _, err := l.lower(c.args, stret, places); err != nil {
		t.Errorf("%s %s: lowering failed: %v", l.target, c.name, err)
		return
	}
	regName := func(n int) origin { return origin{kind: "reg", n: n} }
	for i, k := range c.args {
		p := places[i]
		for j := range max(1, k.Size()/8) {
			var key string
			switch k {
			case kI32:
				key = fmt.Sprintf("g4+%d", 4*i)
			case kI16:
				key = fmt.Sprintf("g2+%d", 2*i)
			case kI8:
				key = fmt.Sprintf("g1+%d", i)
			default:
				key = fmt.Sprintf("g8+%d", 8*(3*i+j))
			}
			got, ok := seen.stored[key]
			if !ok {
				t.Errorf("%s %s: argument %d word %d: no store to %s found in clang's code", l.target, c.name, i, j, key)
				continue
			}
			var want origin
			switch {
			case p.byRef && p.reg >= 0:
				r := regName(int(p.reg))
				want = origin{kind: "deref", ptr: &r, n: 8 * j}
			case p.byRef:
				s := origin{kind: "stack", n: int(p.off)}
				want = origin{kind: "deref", ptr: &s, n: 8 * j}
			case p.reg >= 0:
				want = regName(int(p.reg) + j)
			default:
				want = origin{kind: "stack", n: int(p.off) + 8*j}
			}
			if got.String() != want.String() {
				t.Errorf("%s %s: argument %d (%v) word %d arrives in %v; the lowering puts it in %v", l.target, c.name, i, k, j, got, want)
			}
		}
	}
	r := resultOf(c.result)
	switch {
	case r.memory && l.arm64:
		if !seen.memoryStores[8] {
			t.Errorf("%s %s: the lowering returns the %v in memory at x8; clang's code does not store through x8", l.target, c.name, c.result)
		}
	case r.memory:
		if !seen.memoryStores[0] || !seen.returnsArg[0] {
			t.Errorf("%s %s: the lowering returns the %v in memory through a hidden first argument (rdi, returned in rax); clang's code stores through %v and returns %v", l.target, c.name, c.result, seen.memoryStores, seen.returnsArg)
		}
	case r.float:
		want := map[bool]string{true: "d0", false: "xmm0"}[l.arm64]
		if !seen.resultRegs[want] {
			t.Errorf("%s %s: the lowering returns the %v in %s; clang's code loads it into %v", l.target, c.name, c.result, want, seen.resultRegs)
		}
	case r.regs > 0:
		// Each result register by the names of its widths: a BOOL is read
		// from the low byte, whatever width clang loads it with.
		names := [][]string{{"x0", "w0"}, {"x1", "w1"}}
		if !l.arm64 {
			names = [][]string{{"rax", "eax", "al"}, {"rdx", "edx"}}
		}
		for j := range r.regs {
			n := names[j][0]
			if !slices.ContainsFunc(names[j], func(s string) bool { return seen.resultRegs[s] }) {
				t.Errorf("%s %s: the lowering returns the %v in %s; clang's code loads it into %v", l.target, c.name, c.result, n, seen.resultRegs)
			}
		}
	}
}
