package msl

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The translator turns a .metal source into C++ for clang. It keeps every
// line where it was (rewrites never add or remove a newline), so clang's
// diagnostics and the debug line table name the original .metal line. It
// reads the kernel entry points and their parameters, and emits a launcher
// per entry point that the runtime calls once per thread.

type tokKind int

const (
	tIdent tokKind = iota
	tNumber
	tString
	tPunct
)

type token struct {
	kind       tokKind
	start, end int // byte offsets in the source
	line       int // 1-based
	col        int // 1-based
	text       string
	attr       int // index of the attribute this token belongs to, or -1
}

// attribute is one [[...]] group.
type attribute struct {
	first, last int // token indices of the opening '[' and the closing ']'
	items       []attrItem
}

type attrItem struct {
	name string
	args []string
	line int
	col  int
}

type replacement struct {
	start, end int
	text       string
}

// kernelParam is a parsed kernel parameter.
type kernelParam struct {
	Param
	isRef bool
	expr  string // launcher argument
}

// entryPoint is one function of the library: a kernel definition or a
// host_name instantiation of a kernel template.
type entryPoint struct {
	name     string // Metal function name
	callee   string // C++ expression naming the function to call
	params   []kernelParam
	maxTotal int
	tok      int // first token of the declaration
	// body is the source span dropped when another function is
	// specialized: a kernel's body, or an instantiation's declaration.
	body      [2]int
	constants []FunctionConstant
	file      string // where the function is defined, for #line
	line, col int
	templated bool
	// tmplMin and tmplMax are how many template arguments a kernel
	// template takes, without and with its defaulted parameters
	tmplMin, tmplMax int
	tmplTypes        []bool // which template parameters are types
	// maxHelper names the C++ type whose v is the value of a
	// max_total_threads_per_threadgroup(expr) that is not a literal (a
	// template of the kernel's template parameters), maxExpr.
	maxHelper, maxExpr string
}

type translation struct {
	cpp     string
	entries []entryPoint
	files   map[string]bool // the files of the program, named by line markers
	// tgClassesGeneric puts structs in threadgroup memory in the generic
	// address space (__PM_TG_CLASSES_GENERIC)
	tgClassesGeneric bool
}

type translator struct {
	src       string
	file      string
	marks     []lineMark
	values    constantValues // function constant values
	constants []FunctionConstant
	optional  map[string]bool // constants tested with is_function_constant_defined
	toks      []token
	attrs     []attribute
	repls     []replacement
	errs      []string
	kernels   map[string]*entryPoint // primary definitions, by qualified name
	// overloads are the kernel templates of each qualified name, in order
	// (MLX's two block_masked_gemm templates)
	overloads map[string][]*entryPoint
	entries   []entryPoint
	tgID      int
	maxID     int
	typeNames map[string]bool // template type parameters and typedef names
	blanked   [][2]int        // byte ranges of the declarations left out (blank)
}

// lineMark is a line marker of preprocessed source (# 12 "file.metal" or
// #line 12 "file.metal"): the line after line at is line of file.
type lineMark struct {
	at, line int
	file     string
}

// origin maps a line of the translator's input to the file and line it
// came from, following line markers.
func (tr *translator) origin(line int) (string, int) {
	i := sort.Search(len(tr.marks), func(i int) bool { return tr.marks[i].at >= line })
	if i == 0 {
		return tr.file, line
	}
	m := tr.marks[i-1]
	return m.file, m.line + line - m.at - 1
}

func (tr *translator) errorf(line, col int, format string, args ...any) {
	file, l := tr.origin(line)
	tr.errs = append(tr.errs, fmt.Sprintf("%s:%d:%d: error: %s", file, l, col, fmt.Sprintf(format, args...)))
}

// translate converts source into C++ and lists its entry points; function
// constants take the given values. With only set, the translation holds
// that entry point alone: the bodies of the other kernels and the other
// instantiations are left out, so that specializing one function of a
// large library compiles little.
func translate(source, file string, values []ConstantValue, only string) (*translation, error) {
	var names []string
	if only != "" {
		names = []string{only}
	}
	return translateOnly(source, file, values, names, 0)
}

// translateOnly is translate keeping the entry points named by only, when
// it is not empty, for the language version given as
// CompileOptions.LanguageVersion does.
func translateOnly(source, file string, values []ConstantValue, only []string, version uint32) (*translation, error) {
	tr := &translator{src: source, file: file, kernels: map[string]*entryPoint{}, values: values, optional: map[string]bool{}}
	tr.tokenize()
	tr.findAttributes()
	tr.checkLanguageVersion(version)
	tr.checkSimdgroupShapes()
	tr.checkTokens()
	tr.rewriteVectorConstructs()
	tr.braceArguments()
	tr.addressSpaceSpecializations()
	tr.memberQualifiers()
	tr.walk()
	tr.resolveConstants()
	tr.templateConditions()
	tr.vecDeductions()
	tr.vecSpecializations()
	if len(only) > 0 {
		tr.keepOnly(only)
	}
	tr.bfloatConditionals()
	tr.bfloatIntegerInits()
	tr.shuffleVariables()
	tr.threadgroupDeducedCopies() // after every rewrite it copies
	if len(tr.errs) > 0 {
		return nil, newCompileError(strings.Join(tr.errs, "\n")+"\n", file)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#line 1 %s\n", strconv.Quote(file))
	b.WriteString(tr.apply())
	b.WriteString("\n")
	for i, e := range tr.entries {
		fmt.Fprintf(&b, "#line %d %s\n", e.line, strconv.Quote(e.file))
		if i == 0 {
			// __pm_kernel<decltype(&k)>::call<&k> is kernel k in a function
			// of its own (checked, never inlined into its launcher) with
			// k's own parameter types, so that the launcher passes them
			// ready, in registers where they fit.
			b.WriteString("template <class F> struct __pm_kernel; template <class... P> struct __pm_kernel<void (*)(P...)> { " +
				"template <void (*K)(P...)> __attribute__((noinline)) static void call(P... a) { K(a...); } };\n")
			// __pm_refsizes<decltype(&k)>::at(j) is sizeof(T) for k's
			// parameter j of type T&, 0 for any other: the size of a value
			// a reference buffer parameter reads.
			b.WriteString("template <class T> struct __pm_refsize { static constexpr long v = 0; }; " +
				"template <class T> struct __pm_refsize<T &> { static constexpr long v = sizeof(T); }; " +
				"template <class F> struct __pm_refsizes; template <class... P> struct __pm_refsizes<void (*)(P...)> { " +
				"static long at(long j) { long i = 0, r = 0; ((r = i++ == j ? __pm_refsize<P>::v : r), ...); return r; } };\n")
		}
		// The launcher reads the built-ins and the bindings' addresses, the
		// emulator's own memory, unchecked, and turns them into the
		// kernel's parameters.
		k := "&" + e.callee
		if strings.HasPrefix(e.callee, "static_cast<") {
			k = e.callee // a pointer already
		}
		fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"default\"), no_sanitize(\"coverage\"))) void %s(const __pm_thread *t) { __pm_kernel<decltype(%s)>::call<%s>(", entrySymbol(i), k, k)
		for j, p := range e.params {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.expr)
		}
		b.WriteString("); }\n")
		fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"default\"), no_sanitize(\"coverage\"))) long %s(long j) { return __pm_refsizes<decltype(%s)>::at(j); }\n", refSizeSymbol(i), k)
		if e.maxHelper != "" {
			fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"default\"))) long %s(void) { return %s::v; }\n", maxTotalSymbol(i), e.maxHelper)
		}
	}
	files := map[string]bool{file: true}
	for _, m := range tr.marks {
		if !strings.HasPrefix(m.file, "<") {
			files[m.file] = true
		}
	}
	return &translation{cpp: b.String(), entries: tr.entries, files: files, tgClassesGeneric: !tr.threadgroupClassPointers()}, nil
}

func entrySymbol(i int) string { return fmt.Sprintf("__pm_entry_%d", i) }

// refSizeSymbol returns, given a parameter's position j, sizeof(T) when
// parameter j of entry point i has type T&, else 0.
func refSizeSymbol(i int) string { return fmt.Sprintf("__pm_entry_refsize_%d", i) }

// maxTotalSymbol returns the max_total_threads_per_threadgroup of entry
// point i, where it is an expression.
func maxTotalSymbol(i int) string { return fmt.Sprintf("__pm_entry_maxtotal_%d", i) }

// ---------------------------------------------------------------------------
// Tokens.

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func (tr *translator) tokenize() {
	s := tr.src
	line, lineStart := 1, 0
	atLineStart := true
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
			lineStart = i
			atLineStart = true
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i += 2
			for i < len(s) && !(s[i] == '*' && i+1 < len(s) && s[i+1] == '/') {
				if s[i] == '\n' {
					line++
					lineStart = i + 1
				}
				i++
			}
			i += 2
			continue
		case c == '#' && atLineStart:
			// preprocessor directive, with continuation lines
			tr.directive(i, line)
			for i < len(s) && s[i] != '\n' {
				if s[i] == '\\' && i+1 < len(s) && s[i+1] == '\n' {
					line++
					i += 2
					lineStart = i
					continue
				}
				i++
			}
			continue
		}
		atLineStart = false
		start := i
		col := i - lineStart + 1
		kind := tPunct
		switch {
		case isIdentStart(c):
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			kind = tIdent
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			for i < len(s) {
				d := s[i]
				if (d == '+' || d == '-') && i > start && strings.ContainsRune("eEpP", rune(s[i-1])) && !strings.HasPrefix(strings.ToLower(s[start:i]), "0x") || (d == '+' || d == '-') && i > start && strings.ContainsRune("pP", rune(s[i-1])) {
					i++
					continue
				}
				if isIdentChar(d) || d == '.' || d == '\'' {
					i++
					continue
				}
				break
			}
			kind = tNumber
		case c == '"' || c == '\'':
			i++
			for i < len(s) && s[i] != c && s[i] != '\n' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i++
			if i > len(s) {
				i = len(s)
			}
			kind = tString
		default:
			i++
		}
		tr.toks = append(tr.toks, token{kind: kind, start: start, end: i, line: line, col: col, text: s[start:i], attr: -1})
	}
}

var (
	lineMarker  = regexp.MustCompile(`^#\s*(?:line\s+)?(\d+)\s+("(?:[^"\\]|\\.)*")`)
	ppIncludeRe = regexp.MustCompile(`^` + ppInclude + `\s+(<[A-Za-z0-9_./]+>)`)
)

// directive reads the preprocessor directive starting at offset i on line
// line: a line marker is recorded and written as #line, and the marker of
// an #include of Metal's headers becomes the #include again.
func (tr *translator) directive(i, line int) {
	end := strings.IndexByte(tr.src[i:], '\n')
	if end < 0 {
		end = len(tr.src) - i
	}
	d := tr.src[i : i+end]
	if m := lineMarker.FindStringSubmatch(d); m != nil {
		n, err1 := strconv.Atoi(m[1])
		f, err2 := strconv.Unquote(m[2])
		if err1 == nil && err2 == nil && n > 0 {
			tr.marks = append(tr.marks, lineMark{at: line, line: n, file: f})
			tr.repls = append(tr.repls, replacement{start: i, end: i + end, text: "#line " + m[1] + " " + strconv.Quote(f)})
		}
		return
	}
	if m := ppIncludeRe.FindStringSubmatch(d); m != nil {
		tr.repls = append(tr.repls, replacement{start: i, end: i + end, text: "#include " + m[1]})
	}
}

// findAttributes marks [[...]] groups; they are blanked in the output (clang
// would expand address-space macros inside them) and read here instead.
func (tr *translator) findAttributes() {
	t := tr.toks
	for i := 0; i+1 < len(t); i++ {
		if t[i].text != "[" || t[i+1].text != "[" || t[i+1].start != t[i].end {
			continue
		}
		j := tr.match(i)
		if j < 0 {
			tr.errorf(t[i].line, t[i].col, "unterminated attribute")
			return
		}
		a := attribute{first: i, last: j}
		// items inside [[ ... ]]: tokens i+2 .. j-2, comma separated at depth 0
		var cur []token
		flush := func() {
			if len(cur) == 0 {
				return
			}
			it := attrItem{name: cur[0].text, line: cur[0].line, col: cur[0].col}
			if len(cur) > 1 && cur[1].text == "(" {
				var arg strings.Builder
				d := 0
				for _, k := range cur[1:] {
					if k.text == "(" {
						d++
						if d == 1 {
							continue
						}
					}
					if k.text == ")" {
						d--
						if d == 0 {
							break
						}
					}
					if k.text == "," && d == 1 {
						it.args = append(it.args, arg.String())
						arg.Reset()
						continue
					}
					arg.WriteString(k.text)
				}
				it.args = append(it.args, arg.String())
			}
			a.items = append(a.items, it)
			cur = nil
		}
		d := 0
		for k := i + 2; k <= j-2; k++ {
			switch t[k].text {
			case "(":
				d++
			case ")":
				d--
			}
			if t[k].text == "," && d == 0 {
				flush()
				continue
			}
			cur = append(cur, t[k])
		}
		flush()
		for k := i; k <= j; k++ {
			tr.toks[k].attr = len(tr.attrs)
		}
		tr.attrs = append(tr.attrs, a)
		tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[j].end, text: ""})
		i = j
	}
}

// unsupportedTypes are the MSL types and functions the emulated device does
// not implement.
var unsupportedTypes = map[string]string{
	"texture1d": "textures", "texture1d_array": "textures", "texture2d": "textures", "texture2d_array": "textures",
	"texture2d_ms": "textures", "texture2d_ms_array": "textures", "texture3d": "textures", "texturecube": "textures",
	"texturecube_array": "textures", "texture_buffer": "textures", "depth2d": "depth textures",
	"depth2d_array": "depth textures", "depth2d_ms": "depth textures", "depthcube": "depth textures",
	"sampler": "samplers", "imageblock": "imageblocks", "visible_function_table": "visible function tables",
	"intersection_function_table": "intersection function tables", "acceleration_structure": "ray tracing",
	"primitive_acceleration_structure": "ray tracing", "instance_acceleration_structure": "ray tracing",
	"command_buffer": "indirect command buffers", "render_command": "indirect command buffers",
	"compute_command": "indirect command buffers", "raster_order_group": "raster order groups",
}

// vectorTypeName matches MSL's vector type names.
var vectorTypeName = regexp.MustCompile(`^(char|uchar|short|ushort|int|uint|long|ulong|float|half|bfloat|bool)[234]$`)

// rewriteVectorCast turns a cast to a vector type in cast notation,
// (float4)x, into __pm_cast<float4>() ->* x: in MSL it converts the
// components, where clang's cast would reinterpret the bits. ->* binds
// like a cast, tighter than every binary operator, so the operand needs
// no parentheses. Token i is the type name; (float4) counts as a cast
// when an operand follows and what precedes the parenthesis is no name
// (sizeof(float4), f(float4)) or closing bracket, but for another cast's.
func (tr *translator) rewriteVectorCast(i int) {
	t := tr.toks
	open, closeIdx := tr.prev(i), tr.next(i+1)
	if open < 0 || closeIdx >= len(t) || t[open].text != "(" || t[closeIdx].text != ")" {
		return
	}
	if q := tr.prev(open); q >= 0 {
		castOfCast := t[q].text == ")" && tr.prev(q) >= 0 && (vectorTypeName.MatchString(t[tr.prev(q)].text) || tr.typeNames[t[tr.prev(q)].text]) &&
			tr.prev(tr.prev(q)) >= 0 && t[tr.prev(tr.prev(q))].text == "("
		if !castOfCast && (t[q].kind == tIdent && t[q].text != "return" || t[q].kind == tNumber || t[q].kind == tString ||
			t[q].text == ")" || t[q].text == "]" || t[q].text == ">") {
			return
		}
	}
	n := tr.next(closeIdx + 1)
	if n >= len(t) {
		return
	}
	switch {
	case t[n].kind == tIdent || t[n].kind == tNumber:
	case t[n].kind == tPunct && strings.Contains("(-+~!*", t[n].text):
	default:
		return
	}
	tr.repls = append(tr.repls, replacement{start: t[open].start, end: t[closeIdx].end, text: "__pm_cast<" + t[i].text + ">() ->*"})
	if t[n].text == "(" {
		tr.maskComparison(n, tr.match(n))
	}
}

// isMember reports whether token i follows '.', '->' or a user's '::'
// (a member or a name of the program's own namespace, not Metal's type).
func (tr *translator) isMember(i int) bool {
	p := tr.prev(i)
	if p < 0 {
		return false
	}
	switch tr.toks[p].text {
	case ".":
		return true
	case ">":
		return p > 0 && tr.toks[p-1].text == "-" && tr.toks[p-1].end == tr.toks[p].start
	case ":":
		q := p - 2
		return p > 0 && tr.toks[p-1].text == ":" && q >= 0 && tr.toks[q].kind == tIdent && tr.toks[q].text != "metal"
	}
	return false
}

// startsFunction reports whether token i begins a function declaration at
// namespace scope: it is followed by a type, a name and '('.
func (tr *translator) startsFunction(i int) bool {
	p := tr.prev(i)
	if p >= 0 && tr.toks[p].text != ";" && tr.toks[p].text != "}" && tr.toks[p].text != ">" {
		return false
	}
	a := tr.next(i + 1)
	b := tr.next(a + 1)
	return a < len(tr.toks) && tr.toks[a].kind == tIdent && b < len(tr.toks) && tr.toks[b].kind == tIdent
}

// checkThreadgroupType rejects bfloat values in threadgroup memory: bfloat
// is a class here, and clang cannot assign class objects in the threadgroup
// address space.
func (tr *translator) checkThreadgroupType(i int) {
	t := tr.toks
	p := tr.prev(i)
	for p >= 0 && (t[p].text == "const" || t[p].text == "volatile") {
		p = tr.prev(p)
	}
	if p >= 0 && (t[p].text == ";" || t[p].text == "{" || t[p].text == "}") {
		return // a declaration in a body: a class type there is in the generic address space
	}
	if tr.threadgroupPointerCast(i) {
		return // (threadgroup bfloat *) p: a generic pointer, as the declaration it initializes
	}
	for k := tr.next(i + 1); k < len(t) && k < i+4; k = tr.next(k + 1) {
		switch t[k].text {
		case "bfloat", "bfloat2", "bfloat3", "bfloat4", "bfloat16_t":
			tr.errorf(t[k].line, t[k].col, "bfloat in threadgroup memory is not supported by the emulated device (keep float or half there)")
			return
		case "const", "volatile":
			continue
		}
		return
	}
}

// threadgroupPointerCast reports whether threadgroup token i begins the
// type of a cast to a pointer, (threadgroup T *) p or (const threadgroup
// T *) p, with T a single name (mistral.rs's flash attention:
// (threadgroup bfloat *)(shmem_f16 + ...)).
func (tr *translator) threadgroupPointerCast(i int) bool {
	t := tr.toks
	p := tr.prev(i)
	if p >= 0 && t[p].text == "const" {
		p = tr.prev(p)
	}
	if p < 0 || t[p].text != "(" {
		return false
	}
	k := tr.next(i + 1)
	if k < len(t) && t[k].text == "const" {
		k = tr.next(k + 1)
	}
	if k >= len(t) || t[k].kind != tIdent {
		return false
	}
	k = tr.next(k + 1)
	stars := 0
	for k < len(t) && (t[k].text == "*" || t[k].text == "const") {
		if t[k].text == "*" {
			stars++
		}
		k = tr.next(k + 1)
	}
	return stars > 0 && k < len(t) && t[k].text == ")"
}

// matrixTypeName matches the names of Metal's matrix types.
var matrixTypeName = regexp.MustCompile(`^((float|half)[234]x[234]|matrix)$`)

// builtinTypeName reports whether name is one of MSL's scalar or vector
// types, which stay in the threadgroup address space as written.
func builtinTypeName(name string) bool {
	switch name {
	case "bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "void",
		"int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t", "ptrdiff_t":
		return true
	}
	return vectorTypeName.MatchString(name)
}

// threadgroupType returns the tokens from through last of the type that
// threadgroup token i qualifies (a const or volatile, then a name with
// its template arguments), the index of the name and of the token after
// the type.
func (tr *translator) threadgroupType(i int) (from, name, last, to int, ok bool) {
	t := tr.toks
	from = tr.next(i + 1)
	name = from
	for name < len(t) && (t[name].text == "const" || t[name].text == "volatile") {
		name = tr.next(name + 1)
	}
	if name < len(t) && t[name].text == "typename" {
		// typename A::B (MLX's threadgroup typename gemv_kernel::acc_type)
		k := tr.next(name + 1)
		if k >= len(t) || t[k].kind != tIdent {
			return 0, 0, 0, 0, false
		}
		for {
			n := tr.next(k + 1)
			if n < len(t) && t[n].text == "<" {
				if n = tr.match(n); n < 0 {
					return 0, 0, 0, 0, false
				}
				k = n
				n = tr.next(k + 1)
			}
			if n+2 < len(t) && t[n].text == ":" && t[n+1].text == ":" && t[n+1].start == t[n].end && t[n+2].kind == tIdent {
				k = n + 2
				continue
			}
			break
		}
		return from, name, k, tr.next(k + 1), true
	}
	// bfloat2, 3 and 4 are classes here, as bfloat is (generic in
	// threadgroup memory)
	if name >= len(t) || t[name].kind != tIdent || builtinTypeName(t[name].text) && !strings.HasPrefix(t[name].text, "bfloat") || t[name].text == "auto" {
		return 0, 0, 0, 0, false
	}
	last, to = name, tr.next(name+1)
	if to < len(t) && t[to].text == "::" {
		return 0, 0, 0, 0, false
	}
	if to < len(t) && t[to].text == "<" {
		if to = tr.match(to); to < 0 {
			return 0, 0, 0, 0, false
		}
		last, to = to, tr.next(to+1)
	}
	return from, name, last, to, true
}

// rewriteThreadgroupType writes threadgroup T, for a T that is not a
// scalar or vector type, as __pm_threadgroup<T> (<metal_matrix>), which
// leaves matrices in the generic address space: a matrix type by name
// anywhere, any other type in a cast, (threadgroup T *) p, and in a
// declaration in a function body, where T may be a template parameter
// naming a matrix (llama.cpp's threadgroup k4x4_t *). A function
// parameter's threadgroup T * is left alone, since the alias would keep
// T from being deduced.
func (tr *translator) rewriteThreadgroupType(i int) {
	t := tr.toks
	k := tr.next(i + 1)
	for k < len(t) && (t[k].text == "const" || t[k].text == "volatile") {
		k = tr.next(k + 1)
	}
	if k < len(t) && t[k].text == "auto" {
		// threadgroup auto &r = x: the initializer's type, address space
		// included (or none, for a struct kept generic), is deduced
		tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end})
		return
	}
	from, name, last, to, ok := tr.threadgroupType(i)
	if !ok {
		return
	}
	matrix := matrixTypeName.MatchString(t[name].text)
	p := tr.prev(i)
	for p >= 0 && (t[p].text == "const" || t[p].text == "volatile") {
		p = tr.prev(p) // const threadgroup T *p = ...;
	}
	statement := p >= 0 && (t[p].text == ";" || t[p].text == "{" || t[p].text == "}")
	cast := false
	if p >= 0 && t[p].text == "(" {
		k := to
		for k < len(t) && (t[k].text == "*" || t[k].text == "&" || t[k].text == "const" || t[k].text == "volatile") {
			k = tr.next(k + 1)
		}
		cast = k > to && k < len(t) && t[k].text == ")"
	}
	if q := tr.prev(p); p >= 0 && t[p].text == "<" && q >= 0 && (t[q].text == "reinterpret_cast" || t[q].text == "static_cast") {
		// reinterpret_cast<threadgroup T *>(p) (mistral.rs's paged
		// attention: *reinterpret_cast<threadgroup Float_L_vec *>(logits + i))
		k := to
		for k < len(t) && (t[k].text == "*" || t[k].text == "&" || t[k].text == "const" || t[k].text == "volatile") {
			k = tr.next(k + 1)
		}
		cast = k > to && k < len(t) && t[k].text == ">"
	}
	if !matrix && !statement && !cast && !tr.aliasableParameter(i, name, to) {
		return
	}
	tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[last].end,
		text: "__pm_threadgroup<" + tr.src[t[from].start:t[last].end] + ">"})
}

// threadgroupArrayParam writes a function parameter threadgroup T a[N]
// (candle's block_reducer(threadgroup T shared[BLOCKSIZE])) as threadgroup
// T (*a), the pointer C++ adjusts an array parameter to: clang rejects the
// address space on the array type itself.
func (tr *translator) threadgroupArrayParam(i int) {
	t := tr.toks
	p := tr.prev(i)
	if p >= 0 && t[p].text == "const" {
		p = tr.prev(p)
	}
	if p < 0 || (t[p].text != "(" && t[p].text != ",") {
		return
	}
	// the element type: qualifiers and a (qualified) name with template
	// arguments, then the parameter's name and its first bound
	idents := 0
	k := tr.next(i + 1)
	for k < len(t) && t[k].attr < 0 {
		switch {
		case t[k].text == "<":
			if k = tr.match(k); k < 0 {
				return
			}
		case t[k].text == ":":
		case t[k].kind == tIdent:
			idents++
		default:
			if t[k].text != "[" || idents < 2 {
				return
			}
			name := tr.prev(k)
			end := tr.match(k)
			if t[name].kind != tIdent || end < 0 {
				return
			}
			after := end
			for n := tr.next(after + 1); n < len(t) && t[n].text == "[" && t[n].attr < 0; n = tr.next(after + 1) {
				if after = tr.match(n); after < 0 {
					return
				}
			}
			if n := tr.next(after + 1); n >= len(t) || t[n].attr >= 0 || (t[n].text != "," && t[n].text != ")") {
				return
			}
			tr.repls = append(tr.repls, replacement{start: t[name].start, end: t[end].end, text: "(*" + t[name].text + ")"})
			return
		}
		k = tr.next(k + 1)
	}
}

// aliasableParameter reports whether threadgroup token i begins a
// function parameter threadgroup T* (or &) whose T, named by token name,
// can be written __pm_threadgroup<T> (generic for bfloat and matrices)
// without keeping T from being deduced: T is not a template parameter of
// the function, or another parameter names it too (MLX's
// qmm_n_impl<T, ...>(const device T* x, ..., threadgroup T* Xs)).
func (tr *translator) aliasableParameter(i, name, to int) bool {
	t := tr.toks
	p := tr.prev(i)
	if p >= 0 && t[p].text == "const" {
		p = tr.prev(p) // const threadgroup T* x
	}
	if p < 0 || (t[p].text != "(" && t[p].text != ",") || to >= len(t) {
		return false
	}
	if t[to].text == "(" {
		// threadgroup T (&a)[N], a reference to an array (mistral.rs's
		// paged attention: Qk_dot::dot(const threadgroup Vec (&q)[N], ...))
		r := tr.next(to + 1)
		n := tr.next(r + 1)
		c := tr.next(n + 1)
		if c >= len(t) || t[r].text != "&" || t[n].kind != tIdent || t[c].text != ")" {
			return false
		}
		if b := tr.next(c + 1); b >= len(t) || t[b].text != "[" {
			return false
		}
	} else if t[to].text != "*" && t[to].text != "&" {
		// threadgroup T a[N], a pointer too (threadgroupArrayParam)
		if n := tr.next(to + 1); t[to].kind != tIdent || n >= len(t) || t[n].text != "[" || t[n].attr >= 0 {
			return false
		}
	}
	// the parenthesis opening the parameter list
	open := tr.openingBracket(p)
	if open < 0 || t[open].text != "(" {
		return false
	}
	fn := tr.prev(open)
	if c := tr.prev(fn); fn > 0 && t[fn].text == ")" && c >= 0 && t[c].text == "(" && tr.prev(c) >= 0 && t[tr.prev(c)].text == "operator" {
		fn = tr.prev(c) // operator()(...) (candle's finalize_softmax)
	}
	if fn < 0 || t[fn].kind != tIdent || callKeywords[t[fn].text] {
		return false
	}
	end := tr.match(open)
	if end < 0 {
		return false
	}
	if n := tr.next(end + 1); n >= len(t) || !strings.Contains(" { ; : const thread device constant threadgroup ", " "+t[n].text+" ") {
		return false // a call, not a declaration (or a constructor's, or a qualified member's)
	}
	// the template parameters of the function, if it is a template
	var params map[string]bool
	var order []string // every template parameter's name, in order, "" after one with a default
	for j := tr.prev(fn); j >= 0 && j > fn-512; j = tr.prev(j) {
		if s := t[j].text; s == ";" || s == "}" || s == "{" {
			break
		}
		if t[j].text == ">" {
			if lt := tr.matchBack(j); lt > 0 && t[tr.prev(lt)].text == "template" {
				params = map[string]bool{}
				for k := lt + 1; k < j; k++ {
					if (t[k].text == "typename" || t[k].text == "class") && tr.next(k+1) < j {
						params[t[tr.next(k+1)].text] = true
					}
				}
				depth, last, deflt := 0, "", false
				for k := tr.next(lt + 1); k <= j; k = tr.next(k + 1) {
					switch {
					case k == j || depth == 0 && t[k].text == ",":
						if deflt {
							last = ""
						}
						order = append(order, last)
						last, deflt = "", false
					case t[k].text == "<" || t[k].text == "(":
						depth++
					case t[k].text == ">" || t[k].text == ")":
						depth--
					case depth == 0 && t[k].text == "=":
						deflt = true
					case depth == 0 && t[k].kind == tIdent && !deflt:
						last = t[k].text
					}
				}
				break
			}
		}
	}
	x := t[name].text
	if params[x] {
		// a later template parameter without a default that no function
		// parameter names cannot be deduced, so every call gives the
		// template arguments, x's too (MLX's steel MMATile::load<U, w_x,
		// w_y, str_x, str_y>(const threadgroup U* src))
		named := map[string]bool{}
		for k := open + 1; k < end; k++ {
			if t[k].attr < 0 && t[k].kind == tIdent {
				named[t[k].text] = true
			}
		}
		after := false
		for _, n := range order {
			if after && n != "" && !named[n] {
				return true
			}
			after = after || n == x
		}
	}
	if lt := tr.next(name + 1); !params[x] && lt < len(t) && t[lt].text == "<" {
		if gt := tr.match(lt); gt > 0 && tr.deducedElsewhere(params, lt, gt, open, end) {
			// a class template's specialization (candle's threadgroup
			// indexed<T> shared[BLOCKSIZE]) whose template parameters
			// other parameters name: generic as the struct declared in
			// threadgroup memory that is passed to it
			return true
		}
	}
	if !params[x] {
		// a class template's parameter or a typedef (which may be bfloat)
		// follows the declarations; a struct named as such stays
		// threadgroup, a distinct overload (MLX's complex_t operators),
		// but for a kernel's parameter, which nothing overloads (naga's
		// threadgroup WStruct& w_mem, assigned as a whole)
		return tr.typeNames[x] || strings.HasPrefix(x, "bfloat") || tr.declarationHas(fn, "kernel")
	}
	for k := open + 1; k < end; k++ {
		if k != name && t[k].attr < 0 && t[k].text == x && !tr.threadgroupNamed(k) {
			return true
		}
	}
	return false
}

// deducedElsewhere reports whether every template parameter of the
// function (params) named between the template argument list's brackets
// lt and gt is also named by a parameter of the list open..end outside
// them (and not as a threadgroup parameter's type), so that it is still
// deduced where lt..gt is written through __pm_threadgroup.
func (tr *translator) deducedElsewhere(params map[string]bool, lt, gt, open, end int) bool {
	t := tr.toks
	for j := lt + 1; j < gt; j++ {
		if t[j].kind != tIdent || !params[t[j].text] {
			continue
		}
		found := false
		for k := open + 1; k < end && !found; k++ {
			found = (k < lt || k > gt) && t[k].attr < 0 && t[k].text == t[j].text && !tr.threadgroupNamed(k)
		}
		if !found {
			return false
		}
	}
	return true
}

// threadgroupNamed reports whether token k is the type of a threadgroup
// pointer or reference parameter (threadgroup T*, const threadgroup T*,
// threadgroup const T*), which would be written __pm_threadgroup<T> too,
// so does not let T be deduced (MLX's gemm_loop_aligned(threadgroup T* As,
// threadgroup T* Bs, ...)).
func (tr *translator) threadgroupNamed(k int) bool {
	t := tr.toks
	p := tr.prev(k)
	if p >= 0 && t[p].text == "const" {
		p = tr.prev(p)
	}
	return p >= 0 && t[p].text == "threadgroup"
}

// checkTokens rejects double and rewrites floating-point literals: an
// unsuffixed literal is a float in MSL, and 1.5h is a half.
func (tr *translator) checkTokens() {
	tr.findTypeNames()
	for i, k := range tr.toks {
		if k.attr >= 0 {
			continue
		}
		switch k.kind {
		case tIdent:
			if k.text == "double" {
				tr.errorf(k.line, k.col, "'double' is not supported in Metal")
			}
			if what, ok := unsupportedTypes[k.text]; ok && !tr.isMember(i) {
				tr.errorf(k.line, k.col, "%s (%s) is not supported by the emulated device", what, k.text)
			}
			if (k.text == "vertex" || k.text == "fragment") && tr.startsFunction(i) {
				tr.errorf(k.line, k.col, "%s functions are not supported by the emulated device (compute kernels only)", k.text)
			}
			if k.text == "reinterpret_cast" {
				tr.rewriteThreadgroupReinterpret(i)
			}
			if k.text == "threadgroup" {
				tr.checkThreadgroupType(i)
				tr.rewriteThreadgroupType(i)
				tr.threadgroupArrayParam(i)
			}
			if vectorTypeName.MatchString(k.text) {
				tr.rewriteVectorCast(i)
				tr.rewriteVectorDirectInit(i)
				if open := tr.next(i + 1); open < len(tr.toks) && tr.toks[open].text == "(" && !tr.isMember(i) {
					tr.maskComparison(open, tr.match(open)) // float4(a > b)
				}
			} else if tr.typeNames[k.text] {
				// a template parameter or typedef may name a vector type:
				// its casts convert, as the vector type's do
				tr.rewriteVectorCast(i)
				tr.rewriteFunctionalCast(i)
			}
		case tNumber:
			tr.rewriteNumber(k)
		}
	}
}

// A class template partial specialization,
// template <params> struct name<args>, by its tokens.
type partialSpec struct {
	name              int // the class template's name
	params, paramsEnd int // the < and > of its template parameters
	args, argsEnd     int // the < and > of its template arguments
}

// partialSpecialization tells whether token i is the struct or class
// keyword of a class template partial specialization, and finds its parts.
func (tr *translator) partialSpecialization(i int) (partialSpec, bool) {
	t := tr.toks
	if t[i].attr >= 0 || (t[i].text != "struct" && t[i].text != "class") {
		return partialSpec{}, false
	}
	name := tr.next(i + 1)
	if name >= len(t) || t[name].kind != tIdent {
		return partialSpec{}, false
	}
	lt := tr.next(name + 1)
	if lt >= len(t) || t[lt].text != "<" {
		return partialSpec{}, false
	}
	gt := tr.match(lt)
	p := tr.prev(i)
	if gt < 0 || p < 0 || t[p].text != ">" {
		return partialSpec{}, false
	}
	tl := tr.matchBack(p)
	if tl < 0 || tr.prev(tl) < 0 || t[tr.prev(tl)].text != "template" {
		return partialSpec{}, false
	}
	return partialSpec{name: name, params: tl, paramsEnd: p, args: lt, argsEnd: gt}, true
}

// addressSpaceSpecializations drops a class template partial
// specialization that only the address space of a pointer tells from an
// earlier one (MLX's pointer_element<thread T*> and pointer_element<device
// T*>): thread and device are the same address space here, so the second
// would be a redefinition.
func (tr *translator) addressSpaceSpecializations() {
	t := tr.toks
	seen := map[string]bool{}
	for i := 0; i+2 < len(t); i++ {
		sp, ok := tr.partialSpecialization(i)
		if !ok {
			continue
		}
		name, lt, gt, tl := sp.name, sp.args, sp.argsEnd, sp.params
		var norm, orig strings.Builder
		for j := lt + 1; j < gt; j++ {
			if t[j].attr >= 0 {
				continue
			}
			orig.WriteString(t[j].text + " ")
			if t[j].text != "thread" && t[j].text != "device" {
				norm.WriteString(t[j].text + " ")
			}
		}
		key := t[name].text + "<" + norm.String()
		if !seen[key] {
			seen[key] = true
			continue
		}
		if norm.String() == orig.String() {
			continue // a true redefinition: left for the compiler to report
		}
		end, ok := tr.definitionEnd(gt)
		if !ok {
			continue
		}
		start := t[tr.prev(tl)].start
		tr.dropInside(start, t[end].end)
		tr.repls = append(tr.repls, replacement{start: start, end: t[end].end, text: strings.Repeat("\n", strings.Count(tr.src[start:t[end].end], "\n"))})
		i = end
	}
}

// rewriteVectorDirectInit writes a vector declared by direct
// initialisation with several values, float2 a(x, y) (MLX's short2
// offset(...)), as float2 a = float2(x, y). A function declaration
// (float2 f(float x)) is told apart by its parameters: a type and a name,
// two identifiers in a row, or none.
func (tr *translator) rewriteVectorDirectInit(i int) {
	t := tr.toks
	p := tr.prev(i)
	if q := tr.qualifier(i); q >= 0 && t[q].text == "metal" {
		p = tr.prev(q) // metal::float2 a(x, y)
	}
	if p >= 0 {
		switch t[p].text {
		case ";", "{", "}", "const", "constexpr":
		default:
			return
		}
	}
	for name := tr.next(i + 1); name < len(t) && t[name].kind == tIdent; {
		open := tr.next(name + 1)
		if open >= len(t) || t[open].text != "(" {
			return
		}
		end := tr.match(open)
		if end < 0 || tr.next(open+1) == end {
			return
		}
		after := tr.next(end + 1)
		if after >= len(t) || (t[after].text != ";" && t[after].text != ",") {
			return
		}
		commas := 0
		for j := tr.next(open + 1); j < end; j = tr.next(j + 1) {
			if t[j].text == "," {
				commas++
			}
			if n := tr.next(j + 1); n < end && t[j].kind == tIdent && t[n].kind == tIdent {
				return // parameters: a function declaration
			}
		}
		if commas > 0 { // float4 v(x) is a conversion C++ does too
			tr.repls = append(tr.repls, replacement{start: t[open].start, end: t[open].start, text: "= " + t[i].text})
		}
		if t[after].text == ";" {
			return
		}
		// the next declarator: , name(...) or , name = ... (left alone)
		name = tr.next(after + 1)
		if n := tr.next(name + 1); n >= len(t) || t[n].text != "(" {
			return
		}
	}
}

// findTypeNames collects the names of template type parameters
// (template <typename T, class U = float>), typedefs and alias
// declarations (using T4 = ...), which may name vector types.
func (tr *translator) findTypeNames() {
	t := tr.toks
	tr.typeNames = map[string]bool{}
	add := func(j int) {
		if j >= 0 && j < len(t) && t[j].kind == tIdent && !builtinTypeName(t[j].text) {
			tr.typeNames[t[j].text] = true
		}
	}
	for i := 0; i+1 < len(t); i++ {
		if t[i].attr >= 0 {
			continue
		}
		switch t[i].text {
		case "template":
			lt, gt := tr.angleBrackets(i)
			for j := lt + 1; gt > 0 && j < gt; j++ {
				if t[j].text == "typename" || t[j].text == "class" {
					if n := tr.next(j + 1); n < gt {
						if m := tr.next(n + 1); m <= gt && (t[m].text == "," || t[m].text == "=" || t[m].text == ">" || m == gt) {
							add(n)
						}
					}
				}
			}
		case "using":
			if n := tr.next(i + 1); n < len(t) {
				if m := tr.next(n + 1); m < len(t) && t[m].text == "=" {
					add(n)
				}
			}
		case "typedef":
			depth := 0
			for j := i + 1; j < len(t) && j < i+256; j++ {
				switch t[j].text {
				case "(", "{", "[", "<":
					depth++
				case ")", "}", "]", ">":
					depth--
				}
				if depth == 0 && t[j].text == ";" {
					add(tr.prev(j))
					break
				}
			}
		}
	}
}

// rewriteFunctionalCast writes T(x), for a template parameter or typedef
// T and one argument x in an expression, as __pm_cast<T>() ->* (x), a
// conversion when T names a vector type (ggml's TC(x > 0)), and T(a, b,
// ...) as __pm_construct<T>(a, b, ...), a vector's constructor when T
// names a vector type.
func (tr *translator) rewriteFunctionalCast(i int) {
	t := tr.toks
	open := tr.next(i + 1)
	if open >= len(t) || t[open].text != "(" {
		return
	}
	p := tr.prev(i)
	if p < 0 {
		return
	}
	switch {
	case t[p].kind == tIdent && t[p].text != "return":
		return
	case t[p].text == ":" && tr.ternaryColon(p):
	case t[p].kind == tPunct && strings.Contains(" : . ~ ! > ) ] } ; { ", " "+t[p].text+" "):
		return // a::T(x), a.T(x), a->T(x), ~T(), declarations
	}
	end := tr.match(open)
	if end < 0 || tr.next(open+1) == end {
		return
	}
	for _, j := range tr.topLevel(open, end) {
		if t[j].text == "," {
			// T(a, b): a vector's constructor when T names a vector type
			// (MLX's fft: complex_T(x, -y) of a vec<float, 2>), else T's
			// own
			tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end, text: "__pm_construct<" + t[i].text + ">"})
			return
		}
	}
	if n := tr.next(end + 1); n < len(t) && (strings.Contains(" . [ ( { ", " "+t[n].text+" ") ||
		t[n].text == "-" && n+1 < len(t) && t[n+1].text == ">" && t[n+1].start == t[n].end) {
		return // T(x).y, T(x)[i], T(x)->y bind tighter than the cast would
	}
	tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end, text: "__pm_cast<" + t[i].text + ">() ->*"})
	tr.maskComparison(open, end)
}

// threadgroupClassPointers reports whether the program declares a
// threadgroup reference to a template parameter or typedef that is not a
// scalar or a vector (threadgroup T& x, as functions overloaded by address
// space take): then
// structs in threadgroup memory stay in the threadgroup address space, so
// that such overloads are chosen by it; otherwise they are in the generic
// address space and copied as a whole.
func (tr *translator) threadgroupClassPointers() bool {
	t := tr.toks
	for i := range t {
		if t[i].attr >= 0 || t[i].text != "threadgroup" || tr.isBlanked(t[i].start) {
			continue
		}
		j := tr.next(i + 1)
		for j < len(t) && (t[j].text == "const" || t[j].text == "volatile") {
			j = tr.next(j + 1)
		}
		if j >= len(t) || t[j].kind != tIdent || builtinTypeName(t[j].text) || matrixTypeName.MatchString(t[j].text) || !tr.typeNames[t[j].text] {
			continue // only a template parameter (or typedef) may name the program's structs
		}
	scan:
		for n := tr.next(j + 1); n < len(t); n = tr.next(n + 1) {
			switch t[n].text {
			case "::":
				n = tr.next(n + 1) // a qualified name
			case "<":
				if n = tr.match(n); n < 0 {
					return true
				}
			case "const", "volatile":
			case "&":
				return true
			default:
				break scan
			}
		}
	}
	return false
}

// callKeywords are the keywords that a parenthesis follows without making
// a call.
var callKeywords = map[string]bool{"if": true, "for": true, "while": true, "switch": true, "return": true,
	"sizeof": true, "alignof": true, "decltype": true, "static_assert": true, "catch": true}

// braceArguments rewrites a brace list passed as a function argument,
// f({a, b, c}) (MLX's elem_to_loc_2_nd<IdxT>({N * index.x, index.y,
// index.z}, ...)), to __pm_brace(a, b, c), which converts to the
// parameter's type T as T{a, b, c} would: MSL's compiler accepts a brace
// list for a vector parameter, which C++ vectors do not.
func (tr *translator) braceArguments() {
	t := tr.toks
	for i := range t {
		if t[i].attr >= 0 || t[i].text != "{" {
			continue
		}
		p := tr.prev(i)
		if p < 0 || (t[p].text != "(" && t[p].text != ",") {
			continue
		}
		// the parenthesis holding the argument
		open := p
		if t[p].text == "," {
			if open = tr.openingBracket(p - 1); open < 0 || t[open].text != "(" {
				continue
			}
		}
		callee := tr.prev(open)
		if callee < 0 || !(t[callee].kind == tIdent && !callKeywords[t[callee].text] || t[callee].text == ">") {
			continue
		}
		end := tr.match(i)
		if end < 0 || tr.next(i+1) == end {
			continue
		}
		tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end, text: "__pm_brace("},
			replacement{start: t[end].start, end: t[end].end, text: ")"})
	}
}

func (tr *translator) rewriteNumber(k token) {
	s := strings.ReplaceAll(k.text, "'", "")
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "0x") {
		if !strings.Contains(lower, "p") {
			return
		}
		// hexadecimal float
		if strings.HasSuffix(lower, "h") {
			tr.repls = append(tr.repls, replacement{start: k.end - 1, end: k.end, text: "_h"})
		} else if !strings.HasSuffix(lower, "f") {
			tr.repls = append(tr.repls, replacement{start: k.end, end: k.end, text: "f"})
		}
		return
	}
	isFloat := strings.ContainsAny(lower, ".e")
	suffix := strings.TrimLeft(lower, "0123456789.")
	if strings.HasPrefix(suffix, "e") {
		suffix = strings.TrimLeft(suffix[1:], "+-0123456789")
	}
	switch {
	case suffix == "h":
		tr.repls = append(tr.repls, replacement{start: k.end - 1, end: k.end, text: "_h"})
	case isFloat && suffix == "":
		tr.repls = append(tr.repls, replacement{start: k.end, end: k.end, text: "f"})
	}
}

// ---------------------------------------------------------------------------
// Declarations.

type scope struct {
	namespace bool
	name      string
}

// next returns the index of the next token at or after i that is not part of
// an attribute.
func (tr *translator) next(i int) int {
	for i < len(tr.toks) && tr.toks[i].attr >= 0 {
		i++
	}
	return i
}

// prev returns the index of the previous token before i that is not part of
// an attribute, or -1.
func (tr *translator) prev(i int) int {
	i--
	for i >= 0 && tr.toks[i].attr >= 0 {
		i--
	}
	return i
}

// matchBack returns the index of the "<" that the ">" (or ">>") at i
// closes, or -1.
func (tr *translator) matchBack(i int) int {
	depth := 0
	for j := i; j >= 0; j-- {
		k := tr.toks[j]
		if k.attr >= 0 {
			continue
		}
		switch k.text {
		case ">":
			depth++
		case ">>":
			depth += 2
		case "<":
			depth--
		case "(", "{", ";":
			if depth > 0 && k.text != "(" {
				return -1
			}
		}
		if depth == 0 {
			return j
		}
	}
	return -1
}

// match returns the index of the token closing the bracket at i, or -1
// where none does; tokens of attributes already found are passed over,
// and a ">>" closes two "<".
func (tr *translator) match(i int) int {
	open := tr.toks[i].text
	closeTok := map[string]string{"(": ")", "[": "]", "{": "}", "<": ">"}[open]
	depth := 0
	for j := i; j < len(tr.toks); j++ {
		if tr.toks[j].attr >= 0 {
			continue
		}
		switch tr.toks[j].text {
		case open:
			depth++
		case closeTok:
			depth--
			if depth == 0 {
				return j
			}
		case ">>":
			if open == "<" {
				depth -= 2
				if depth <= 0 {
					return j
				}
			}
		}
	}
	return -1
}

func (tr *translator) walk() {
	var scopes []scope
	t := tr.toks
	inBlock := func() bool {
		for _, s := range scopes {
			if !s.namespace {
				return true
			}
		}
		return false
	}
	nsPrefix := func() string {
		var b strings.Builder
		for _, s := range scopes {
			if s.namespace && s.name != "" {
				b.WriteString(s.name + "::")
			}
		}
		return b.String()
	}
	for i := 0; i < len(t); i++ {
		if a := t[i].attr; a >= 0 {
			// [[kernel]] void f(...), as MLX's generated kernels spell it
			if i == tr.attrs[a].first && !inBlock() && hasItem(tr.attrs[a].items, "kernel") {
				tr.kernelDecl(i, nsPrefix())
			}
			continue
		}
		switch t[i].text {
		case "{":
			sc := scope{}
			p := tr.prev(i)
			if p >= 0 && t[p].text == "namespace" {
				sc.namespace = true
			} else if q := tr.prev(p); p >= 1 && q >= 0 && t[p].kind == tIdent && t[q].text == "namespace" {
				sc.namespace = true
				sc.name = t[p].text
			}
			scopes = append(scopes, sc)
		case "}":
			if len(scopes) > 0 {
				scopes = scopes[:len(scopes)-1]
			}
		case "kernel":
			if !inBlock() {
				tr.kernelDecl(i, nsPrefix())
			}
		case "constant":
			if !inBlock() {
				i = tr.functionConstantDecl(i)
			}
		case "template":
			n := tr.next(i + 1)
			if !inBlock() && n < len(t) && t[n].text != "<" {
				i = tr.instantiation(i, nsPrefix())
			}
		case "threadgroup":
			if inBlock() {
				tr.threadgroupDecl(i)
			}
		}
	}
}

// attributesBefore collects the attributes directly preceding token i.
func (tr *translator) attributesBefore(i int) []attrItem {
	var items []attrItem
	j := i - 1
	for j >= 0 && tr.toks[j].attr >= 0 {
		a := tr.attrs[tr.toks[j].attr]
		items = append(items, a.items...)
		j = a.first - 1
	}
	return items
}

func hasItem(items []attrItem, name string) bool {
	for _, it := range items {
		if it.name == name {
			return true
		}
	}
	return false
}

// hostName returns the name of a [[host_name("...")]] among items;
// adjacent string literals are concatenated, as in C++ (macros build names
// so: "scale_" #type).
func hostName(items []attrItem) (string, bool) {
	for _, it := range items {
		if it.name != "host_name" || len(it.args) != 1 {
			continue
		}
		var b strings.Builder
		rest := strings.TrimSpace(it.args[0])
		for rest != "" {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil || q[0] != '"' {
				return "", false
			}
			s, _ := strconv.Unquote(q)
			b.WriteString(s)
			rest = strings.TrimSpace(rest[len(q):])
		}
		if b.Len() == 0 {
			return "", false
		}
		return b.String(), true
	}
	return "", false
}

// kernelDecl reads the kernel whose kernel keyword or [[kernel]] attribute
// is token k.
func (tr *translator) kernelDecl(k int, ns string) {
	// explicit instantiations are handled by instantiation()
	p := tr.prev(k)
	if p >= 0 && tr.toks[p].text == "template" {
		return
	}
	i := k + 1
	if a := tr.toks[k].attr; a >= 0 {
		i = tr.attrs[a].last + 1
	}
	tr.kernelAt(k, tr.next(i), ns)
}

// kernelAt parses a kernel definition whose return type starts at token i;
// k is the kernel keyword (or its attribute).
func (tr *translator) kernelAt(k, i int, ns string) {
	t := tr.toks
	// find '(' of the parameter list
	j := i
	for j < len(t) && (t[j].attr >= 0 || t[j].text != "(") {
		if t[j].attr < 0 && (t[j].text == ";" || t[j].text == "{") {
			return
		}
		j++
	}
	if j >= len(t) {
		return
	}
	nameIdx := tr.prev(j)
	if nameIdx < 0 || t[nameIdx].kind != tIdent {
		return
	}
	closeIdx := tr.match(j)
	if closeIdx < 0 {
		tr.errorf(t[j].line, t[j].col, "unbalanced parentheses in kernel declaration")
		return
	}
	after := tr.next(closeIdx + 1)
	if after >= len(t) || t[after].text != "{" {
		return // a declaration, not a definition
	}
	if t[i].text != "void" {
		tr.errorf(t[i].line, t[i].col, "kernel %s must return void", t[nameIdx].text)
	}
	e := entryPoint{name: t[nameIdx].text, callee: ns + t[nameIdx].text, maxTotal: MaxThreadsPerThreadgroup, tok: k}
	e.file, e.line = tr.origin(t[nameIdx].line)
	e.col = t[nameIdx].col
	items := tr.attributesBefore(k)
	for x := k; x < j; x++ {
		if t[x].attr >= 0 && (x == 0 || t[x-1].attr != t[x].attr) {
			items = append(items, tr.attrs[t[x].attr].items...)
		}
	}
	if n, ok := hostName(items); ok {
		e.name = n
	}
	// template kernel?
	p := tr.prev(k)
	for p >= 0 && t[p].kind == tIdent && (t[p].text == "inline" || t[p].text == "static") {
		p = tr.prev(p)
	}
	if p >= 0 && (t[p].text == ">" || t[p].text == ">>") {
		e.templated = true
		if lt := tr.matchBack(p); lt >= 0 {
			e.tmplMin, e.tmplMax, e.tmplTypes = tr.templateArity(lt, p)
		}
	}
	for _, it := range items {
		switch it.name {
		case "max_total_threads_per_threadgroup":
			if len(it.args) != 1 {
				break
			}
			if v, err := strconv.Atoi(it.args[0]); err == nil && v > 0 && v <= MaxThreadsPerThreadgroup {
				e.maxTotal = v
				break
			} else if err == nil {
				tr.errorf(it.line, it.col, "max_total_threads_per_threadgroup must be between 1 and %d", MaxThreadsPerThreadgroup)
				break
			}
			// an expression (of the template's parameters, say): a
			// constant evaluated by the compiler, for each instantiation
			tr.maxID++
			e.maxHelper = fmt.Sprintf("__pm_maxtotal_%d", tr.maxID)
			e.maxExpr = it.args[0]
			at, params := t[k].start, ""
			if e.templated {
				lt := tr.matchBack(p)
				if lt < 0 || tr.prev(lt) < 0 || t[tr.prev(lt)].text != "template" {
					tr.errorf(it.line, it.col, "cannot find the template parameters of kernel %s", t[nameIdx].text)
					break
				}
				at, params = t[tr.prev(lt)].start, tr.text(lt+1, p)
				if t[p].text == ">>" {
					params += ">"
				}
				tr.repls = append(tr.repls, replacement{start: at, end: at,
					text: fmt.Sprintf("template <%s> struct %s { static constexpr long v = (%s); }; ", params, e.maxHelper, e.maxExpr)})
			} else {
				// before the blanked attribute that starts at the same place
				tr.repls = append([]replacement{{start: at, end: at,
					text: fmt.Sprintf("struct %s { static constexpr long v = (%s); }; ", e.maxHelper, e.maxExpr)}}, tr.repls...)
			}
			e.maxHelper = ns + e.maxHelper
		}
	}
	e.params = tr.params(j, closeIdx, e.name)
	if bodyEnd := tr.match(after); bodyEnd > after {
		e.body = [2]int{t[after].start, t[bodyEnd].end}
	} else {
		e.body = [2]int{t[after].start, t[after].end}
	}
	key := ns + t[nameIdx].text
	if e.templated {
		tr.kernels[key] = &e
		if tr.overloads == nil {
			tr.overloads = map[string][]*entryPoint{}
		}
		tr.overloads[key] = append(tr.overloads[key], &e)
		return
	}
	tr.kernels[key] = &e
	tr.addEntry(e)
}

// topLevel returns the tokens between the brackets at open and end that
// no inner (, [ or { encloses, brackets included.
func (tr *translator) topLevel(open, end int) []int {
	var top []int
	depth := 0
	for j := open + 1; j < end; j++ {
		switch tr.toks[j].text {
		case "(", "[", "{":
			if depth == 0 {
				top = append(top, j)
			}
			depth++
			continue
		case ")", "]", "}":
			depth--
		}
		if depth == 0 {
			top = append(top, j)
		}
	}
	return top
}

// angleBrackets returns the '<' after token i and the '>' that closes it,
// or -1, -1 when no '<' follows i or nothing closes it.
func (tr *translator) angleBrackets(i int) (lt, gt int) {
	lt = tr.next(i + 1)
	if lt >= len(tr.toks) || tr.toks[lt].text != "<" {
		return -1, -1
	}
	if gt = tr.match(lt); gt < 0 {
		return -1, -1
	}
	return lt, gt
}

// openingBracket returns the bracket ((, [ or {) that opens the innermost
// group holding tokens from back to it (within 4096 tokens), or -1 when a
// ';' comes first.
func (tr *translator) openingBracket(from int) int {
	t, depth := tr.toks, 0
	for j := from; j >= 0 && j > from-4096; j-- {
		if t[j].attr >= 0 {
			continue
		}
		switch t[j].text {
		case ")", "]", "}":
			depth++
		case "(", "[", "{":
			if depth == 0 {
				return j
			}
			depth--
		case ";":
			return -1
		}
	}
	return -1
}

// keepOnly drops every entry point but the one named name.
func (tr *translator) keepOnly(names []string) {
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
	}
	kept := tr.entries[:0]
	for _, e := range tr.entries {
		if keep[e.name] {
			kept = append(kept, e)
			continue
		}
		start, end := e.body[0], e.body[1]
		text := strings.Repeat("\n", strings.Count(tr.src[start:end], "\n"))
		if tr.src[start] == '{' {
			text = "{}" + text
		}
		tr.dropInside(start, end)
		tr.repls = append(tr.repls, replacement{start: start, end: end, text: text})
	}
	tr.entries = kept
}

func (tr *translator) addEntry(e entryPoint) {
	for _, o := range tr.entries {
		if o.name == e.name {
			tr.errs = append(tr.errs, fmt.Sprintf("%s:%d:1: error: kernel %s is defined twice (line %d and line %d)", e.file, e.line, e.name, o.line, e.line))
			return
		}
	}
	tr.entries = append(tr.entries, e)
}

// builtins maps the MSL built-in attributes to the launcher expression.
var builtins = map[string]string{
	"thread_position_in_grid":             "__PM_BI3(t->thread_position_in_grid)",
	"thread_position_in_threadgroup":      "__PM_BI3(t->thread_position_in_threadgroup)",
	"threadgroup_position_in_grid":        "__PM_BI3(t->threadgroup_position_in_grid)",
	"threads_per_threadgroup":             "__PM_BI3(t->threads_per_threadgroup)",
	"threadgroups_per_grid":               "__PM_BI3(t->s->threadgroups_per_grid)",
	"threads_per_grid":                    "__PM_BI3(t->s->threads_per_grid)",
	"grid_size":                           "__PM_BI3(t->s->threads_per_grid)",
	"grid_origin":                         "__PM_BI1(0)",
	"dispatch_threads_per_threadgroup":    "__PM_BI3(t->s->dispatch_threads_per_threadgroup)",
	"thread_index_in_threadgroup":         "__PM_BI1(t->thread_index_in_threadgroup)",
	"thread_index_in_simdgroup":           "__PM_BI1(t->thread_index_in_simdgroup)",
	"simdgroup_index_in_threadgroup":      "__PM_BI1(t->simdgroup_index_in_threadgroup)",
	"threads_per_simdgroup":               "__PM_BI1(32)",
	"thread_execution_width":              "__PM_BI1(32)",
	"simdgroups_per_threadgroup":          "__PM_BI1(t->simdgroups_per_threadgroup)",
	"dispatch_simdgroups_per_threadgroup": "__PM_BI1(t->dispatch_simdgroups_per_threadgroup)",
	"thread_index_in_quadgroup":           "__PM_BI1(t->thread_index_in_threadgroup % 4)",
	"quadgroup_index_in_threadgroup":      "__PM_BI1(t->thread_index_in_threadgroup / 4)",
	"threads_per_quadgroup":               "__PM_BI1(4)",
}

// BuiltIns lists the built-in parameter attributes kernels may use.
func BuiltIns() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// listItems returns the items of the comma-separated list between the
// brackets at tokens open and end, each as its tokens' range [first,
// last+1): the commas outside every inner bracket and template argument
// list separate them. An empty last item is left out.
func (tr *translator) listItems(open, end int) [][2]int {
	t := tr.toks
	var items [][2]int
	start, depth := open+1, 0
	for i := open + 1; i < end; i++ {
		if t[i].attr >= 0 {
			continue
		}
		switch t[i].text {
		case "(", "[", "{", "<":
			depth++
		case ")", "]", "}", ">":
			depth--
		case ">>":
			depth -= 2
		case ",":
			if depth == 0 {
				items = append(items, [2]int{start, i})
				start = i + 1
			}
		}
	}
	if start < end {
		items = append(items, [2]int{start, end})
	}
	return items
}

// params parses the parameter list between tokens open and closeIdx.
func (tr *translator) params(open, closeIdx int, kernel string) []kernelParam {
	t := tr.toks
	var out []kernelParam
	var implicit []int // indices in out of parameters without an index attribute
	for _, g := range tr.listItems(open, closeIdx) {
		var items []attrItem
		lastPlain := -1
		isRef, isPtr, constant := false, false, false
		for i := g[0]; i < g[1]; i++ {
			if t[i].attr >= 0 {
				if i == g[0] || t[i-1].attr != t[i].attr {
					items = append(items, tr.attrs[t[i].attr].items...)
				}
				continue
			}
			lastPlain = i
		}
		if lastPlain < 0 {
			continue
		}
		if len(items) == 0 && g[1]-g[0] == 1 && t[g[0]].text == "void" {
			continue
		}
		// an array parameter (constant const int64_t strides[2]) is a
		// pointer to its first element, as in C++: a buffer
		isArray := false
		for lastPlain > g[0] && t[lastPlain].text == "]" {
			depth := 0
			j := lastPlain
			for ; j > g[0]; j-- {
				if t[j].attr >= 0 {
					continue
				}
				if t[j].text == "]" {
					depth++
				} else if t[j].text == "[" {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if t[j].text != "[" || j == g[0] {
				break
			}
			lastPlain = j - 1
			for lastPlain > g[0] && t[lastPlain].attr >= 0 {
				lastPlain--
			}
			isArray = true
		}
		nameTok := t[lastPlain]
		if isArray {
			isPtr = true
		}
		for i := g[0]; i < lastPlain; i++ {
			switch t[i].text {
			case "constant":
				constant = true
			case "*":
				isPtr = true
			case "&":
				isRef = true
			}
		}
		// const applies to the data only if it comes before the last * or &
		lastStar := -1
		for i := g[0]; i < lastPlain; i++ {
			if t[i].text == "*" || t[i].text == "&" {
				lastStar = i
			}
		}
		if isArray && lastStar < 0 {
			lastStar = lastPlain
		}
		dataConst := false
		for i := g[0]; i < lastStar; i++ {
			if t[i].text == "const" {
				dataConst = true
			}
		}
		p := kernelParam{Param: Param{Name: nameTok.text}}
		var it attrItem
		for _, x := range items {
			// [[function_constant(name)]] beside the binding makes the
			// parameter optional; it is always bound here.
			if x.name != "function_constant" {
				it = x
				break
			}
		}
		if it.name == "" {
			// Apple numbers a device or constant buffer (or a threadgroup
			// pointer or reference, as naga declares workgroup variables)
			// without an index attribute itself: the first index no
			// attributed parameter of its kind uses, in parameter order.
			space := ""
			for i := g[0]; i < lastPlain; i++ {
				switch t[i].text {
				case "device", "constant", "threadgroup":
					space = t[i].text
				}
			}
			switch {
			case (space == "device" || space == "constant") && (isPtr || isRef):
				it = attrItem{name: "buffer", line: nameTok.line, col: nameTok.col}
			case space == "threadgroup" && (isPtr || isRef):
				it = attrItem{name: "threadgroup", line: nameTok.line, col: nameTok.col}
			default:
				tr.errorf(nameTok.line, nameTok.col, "parameter %s of kernel %s has no attribute and is not a device, constant or threadgroup pointer or reference ([[buffer(n)]], [[threadgroup(n)]] or a built-in)", nameTok.text, kernel)
				continue
			}
			implicit = append(implicit, len(out))
		}
		if it.name == "buffer" || it.name == "threadgroup" {
			idx, ok := attrIndex(it)
			if it.args == nil {
				idx, ok = 0, true // numbered below
			}
			if !ok {
				tr.errorf(it.line, it.col, "%s index of parameter %s must be a literal between 0 and 30", it.name, nameTok.text)
				continue
			}
			p.Index = idx
		}
		switch {
		case it.name == "buffer":
			p.Kind = Buffer
			p.ReadOnly = constant || dataConst
			switch {
			case isRef:
				p.isRef = true
			case isPtr:
			default:
				tr.errorf(nameTok.line, nameTok.col, "buffer parameter %s must be a pointer or a reference", nameTok.text)
				continue
			}
		case it.name == "threadgroup":
			if !isPtr && !isRef {
				tr.errorf(nameTok.line, nameTok.col, "threadgroup parameter %s must be a pointer or a reference", nameTok.text)
				continue
			}
			p.Kind = ThreadgroupMemory
			p.isRef = isRef
		default:
			expr, ok := builtins[it.name]
			if !ok {
				what := "kernel parameter attribute [[" + it.name + "]]"
				switch it.name {
				case "texture", "sampler":
					what = "[[" + it.name + "(n)]] parameters (" + it.name + "s)"
				}
				tr.errorf(it.line, it.col, "%s on %s is not supported by the emulated device", what, nameTok.text)
				continue
			}
			p.Kind = BuiltIn
			p.BuiltIn = it.name
			p.expr = expr
		}
		out = append(out, p)
	}
	// number the unattributed buffers and threadgroup pointers
	used := map[[2]int]bool{}
	isImplicit := map[int]bool{}
	for _, i := range implicit {
		isImplicit[i] = true
	}
	for i, p := range out {
		if p.Kind != BuiltIn && !isImplicit[i] {
			used[[2]int{int(p.Kind), p.Index}] = true
		}
	}
	for _, i := range implicit {
		p := &out[i]
		idx := 0
		for used[[2]int{int(p.Kind), idx}] {
			idx++
		}
		if idx >= MaxBindings {
			tr.errorf(t[open].line, t[open].col, "kernel %s: no %s index left for parameter %s (indices 0 to %d)", kernel, p.Kind, p.Name, MaxBindings-1)
			continue
		}
		used[[2]int{int(p.Kind), idx}] = true
		p.Index = idx
	}
	for i := range out {
		p := &out[i]
		switch {
		case p.Kind == Buffer && p.isRef:
			p.expr = fmt.Sprintf("__pm_bufr{t->s->buf[%d]}", p.Index)
		case p.Kind == Buffer:
			p.expr = fmt.Sprintf("__pm_bufp{t->s->buf[%d]}", p.Index)
		case p.Kind == ThreadgroupMemory && p.isRef:
			p.expr = fmt.Sprintf("__pm_bufr{t->s->tg[%d]}", p.Index)
		case p.Kind == ThreadgroupMemory:
			p.expr = fmt.Sprintf("__pm_bufp{t->s->tg[%d]}", p.Index)
		}
	}
	// duplicate indices
	seen := map[[2]int]string{}
	for _, p := range out {
		if p.Kind == BuiltIn {
			continue
		}
		k := [2]int{int(p.Kind), p.Index}
		if o, dup := seen[k]; dup {
			tr.errorf(t[open].line, t[open].col, "kernel %s: parameters %s and %s use the same %s index %d", kernel, o, p.Name, p.Kind, p.Index)
		}
		seen[k] = p.Name
	}
	return out
}

func attrIndex(it attrItem) (int, bool) {
	if len(it.args) != 1 {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimRight(it.args[0], "uU"), 0, 32)
	if err != nil || v < 0 || v >= MaxBindings {
		return 0, false
	}
	return int(v), true
}

// instantiation handles `template [[host_name("x")]] kernel ... f<args>...;`
// starting at the template keyword; returns the index of the closing ';'.
func (tr *translator) instantiation(i int, ns string) int {
	t := tr.toks
	end := i
	for end < len(t) && (t[end].attr >= 0 || t[end].text != ";") {
		if t[end].attr < 0 && t[end].text == "{" {
			return i // not an explicit instantiation
		}
		end++
	}
	if end >= len(t) {
		return i
	}
	var items []attrItem
	isKernel := false
	target, targetEnd := -1, -1
	deduced := [2]int{-1, -1} // the parameter list of a declaration deducing the arguments
	for j := i + 1; j < end; j++ {
		if t[j].attr >= 0 {
			if t[j-1].attr != t[j].attr {
				items = append(items, tr.attrs[t[j].attr].items...)
			}
			continue
		}
		if t[j].text == "kernel" {
			isKernel = true
		}
		if t[j].text == "(" && target >= 0 {
			break
		}
		if t[j].text == "(" {
			// template [[host_name("x")]] [[kernel]] void f(params);
			// deduces f's template arguments from the parameters
			if p := tr.prev(j); p > i && t[p].kind == tIdent && t[p].text != "decltype" {
				if m := tr.match(j); m > 0 && m < end {
					target, targetEnd, deduced = p, p, [2]int{j + 1, m}
				}
				break
			}
		}
		if t[j].kind == tIdent {
			n := tr.next(j + 1)
			if n < end && t[n].text == "<" {
				m := tr.match(n)
				if m > 0 && m < end {
					target, targetEnd = j, m
					j = m
				}
			}
		}
	}
	hostName, named := hostName(items)
	if hasItem(items, "kernel") {
		isKernel = true
	}
	if !isKernel || !named || target < 0 {
		return end
	}
	// qualified name: include preceding ident:: pairs
	q := t[target].text
	k := target
	for k >= 2 && t[k-1].text == "::" && t[k-2].kind == tIdent {
		q = t[k-2].text + "::" + q
		k -= 2
	}
	prim := tr.kernels[ns+q]
	over := tr.overloads[ns+q]
	if prim == nil {
		prim, over = tr.kernels[q], tr.overloads[q]
	}
	if len(over) > 1 {
		// the template that takes as many arguments as are given
		// (a literal argument is not a type's)
		literal := tr.templateArgs(target, targetEnd)
		for _, o := range over {
			fits := len(literal) >= o.tmplMin && len(literal) <= o.tmplMax
			for a, lit := range literal {
				fits = fits && !(lit && a < len(o.tmplTypes) && o.tmplTypes[a])
			}
			if fits {
				prim = o
				break
			}
		}
	}
	if prim == nil || !prim.templated {
		tr.errorf(t[target].line, t[target].col, "host_name %q instantiates %s, which is not a kernel template defined above", hostName, q)
		return end
	}
	var args strings.Builder
	for j := target; j <= targetEnd; j++ {
		if t[j].attr >= 0 {
			continue
		}
		if j > target && t[j].start > t[j-1].end {
			args.WriteByte(' ')
		}
		args.WriteString(t[j].text)
	}
	callee := args.String()
	if !strings.Contains(q, "::") {
		callee = ns + callee
	}
	if deduced[0] >= 0 {
		callee = fmt.Sprintf("static_cast<void (*)(%s)>(&%s)", tr.text(deduced[0], deduced[1]), callee)
	}
	e := entryPoint{name: hostName, callee: callee, params: prim.params, maxTotal: prim.maxTotal, tok: i, body: [2]int{t[i].start, t[end].end}}
	e.file, e.line = tr.origin(t[target].line)
	e.col = t[target].col
	if prim.maxHelper != "" && prim.templated {
		if deduced[0] >= 0 {
			tr.errorf(t[target].line, t[target].col, "host_name %q: an instantiation deducing its template arguments of kernel %s, whose max_total_threads_per_threadgroup(%s) depends on them, is not supported by the emulated device (name the template arguments: %s<...>)", hostName, q, prim.maxExpr, q)
			return end
		}
		e.maxHelper = prim.maxHelper + "<" + tr.text(tr.next(target+1)+1, targetEnd) + ">"
		e.maxExpr = prim.maxExpr
	}
	for _, it := range items {
		if it.name == "max_total_threads_per_threadgroup" && len(it.args) == 1 {
			if v, err := strconv.Atoi(it.args[0]); err == nil && v > 0 && v <= MaxThreadsPerThreadgroup {
				e.maxTotal = v
			}
		}
	}
	tr.addEntry(e)
	return end
}

// threadgroupDecl rewrites `threadgroup T name[N]...;` in a function body so
// that every thread of the threadgroup shares one object.
func (tr *translator) threadgroupDecl(i int) {
	t := tr.toks
	p := tr.prev(i)
	if p >= 0 && t[p].text != ";" && t[p].text != "{" && t[p].text != "}" {
		return
	}
	end := i
	depth := 0
	for end < len(t) {
		if t[end].attr < 0 {
			switch t[end].text {
			case "(", "[", "{", "<":
				depth++
			case ")", "]", "}", ">":
				depth--
			}
			if t[end].text == ";" && depth == 0 {
				break
			}
		}
		end++
	}
	if end >= len(t) {
		return
	}
	// split declarators
	var decls [][2]int
	start := i
	depth = 0
	for j := i; j < end; j++ {
		if t[j].attr >= 0 {
			continue
		}
		switch t[j].text {
		case "*", "&", "(":
			if depth == 0 {
				return // a pointer: nothing shared
			}
		case "=":
			if depth == 0 {
				// an initializer (threadgroup float a[32] = {0};) is not
				// applied: the memory starts uninitialised, as the
				// emulator fills it
				initEnd, d := j+1, 0
				for ; initEnd < end; initEnd++ {
					switch t[initEnd].text {
					case "(", "[", "{":
						d++
					case ")", "]", "}":
						d--
					}
					if d == 0 && t[initEnd].text == "," {
						break
					}
				}
				decls = append(decls, [2]int{start, j})
				start = initEnd + 1
				j = initEnd
				if initEnd >= end {
					start = -1
				}
			}
		case "[", "<":
			depth++
		case "]", ">":
			depth--
		case ",":
			if depth == 0 {
				decls = append(decls, [2]int{start, j})
				start = j + 1
			}
		}
	}
	if start >= 0 {
		decls = append(decls, [2]int{start, end})
	}
	// first declarator: type tokens, then name, then dims
	nameOf := func(d [2]int) (int, bool) {
		for j := d[0]; j < d[1]; j++ {
			if t[j].attr >= 0 {
				continue
			}
			n := tr.next(j + 1)
			if t[j].kind == tIdent && (n >= d[1] || t[n].text == "[") {
				return j, true
			}
		}
		return -1, false
	}
	first, ok := nameOf(decls[0])
	if !ok || first == i {
		return
	}
	typeText := tr.text(i, first)
	if from, _, _, to, ok := tr.threadgroupType(i); ok && to == first {
		typeText = "__pm_threadgroup<" + tr.text(from, to) + ">"
	}
	var b strings.Builder
	for di, d := range decls {
		n := first
		if di > 0 {
			if n, ok = nameOf(d); !ok {
				return
			}
		}
		dims := tr.text(n+1, d[1])
		tr.tgID++
		id := tr.tgID
		ty := fmt.Sprintf("__pm_tgt_%d", id)
		fmt.Fprintf(&b, "typedef %s %s%s; %s &%s = *(%s *)__pm_tg_static(%d, sizeof(%s), alignof(%s)); ",
			typeText, ty, dims, ty, t[n].text, ty, id, ty, ty)
	}
	span := tr.src[t[i].start:t[end].end]
	b.WriteString(strings.Repeat("\n", strings.Count(span, "\n")))
	// drop replacements inside the span (literal suffixes are kept by text())
	tr.dropInside(t[i].start, t[end].end)
	tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[end].end, text: b.String()})
}

// text returns the source text of tokens [from, to) with the literal
// rewrites applied and attributes left out.
func (tr *translator) text(from, to int) string {
	var b strings.Builder
	prevEnd := -1
	for j := from; j < to; j++ {
		k := tr.toks[j]
		if k.attr >= 0 {
			continue
		}
		// tokens adjacent in the source stay so (a::b, not a : : b)
		if b.Len() > 0 && k.start != prevEnd {
			b.WriteByte(' ')
		}
		prevEnd = k.end
		txt := k.text
		for _, r := range tr.repls {
			switch {
			case r.start == k.end && r.end == k.end:
				txt += r.text
			case r.start > k.start && r.end == k.end:
				txt = tr.src[k.start:r.start] + r.text
			}
		}
		b.WriteString(txt)
	}
	return b.String()
}

// blank leaves out the declaration from byte start to end, keeping its
// lines: the replacements inside it are dropped, and its range is recorded
// for the passes that read the tokens afterwards (isBlanked).
func (tr *translator) blank(start, end int) {
	tr.dropInside(start, end)
	tr.repls = append(tr.repls, replacement{start: start, end: end, text: strings.Repeat("\n", strings.Count(tr.src[start:end], "\n"))})
	tr.blanked = append(tr.blanked, [2]int{start, end})
}

// isBlanked reports whether byte pos lies in a declaration left out.
func (tr *translator) isBlanked(pos int) bool {
	for _, r := range tr.blanked {
		if pos >= r[0] && pos < r[1] {
			return true
		}
	}
	return false
}

func (tr *translator) dropInside(start, end int) {
	kept := tr.repls[:0]
	for _, r := range tr.repls {
		if r.start >= start && r.end <= end {
			continue
		}
		kept = append(kept, r)
	}
	tr.repls = kept
}

// apply returns the source with every replacement made; newlines inside
// replaced spans are kept so that lines do not move.
func (tr *translator) apply() string {
	sort.SliceStable(tr.repls, func(a, b int) bool { return tr.repls[a].start < tr.repls[b].start })
	var b strings.Builder
	pos := 0
	for _, r := range tr.repls {
		if r.start < pos {
			continue
		}
		b.WriteString(tr.src[pos:r.start])
		b.WriteString(r.text)
		if !strings.Contains(r.text, "\n") {
			b.WriteString(strings.Repeat("\n", strings.Count(tr.src[r.start:r.end], "\n")))
		}
		pos = r.end
	}
	b.WriteString(tr.src[pos:])
	return b.String()
}

// vecSpecializations makes a class template partial specialization on
// vec<T, N> with a template parameter T (MLX's fft: template <typename T>
// struct FFTStorageTraits<vec<T, 2>>) match as in MSL. vec<T, N> is an
// alias through a trait here (bfloat vectors are a class), which C++ cannot
// deduce T from: the specialization is written on clang's vector of T,
// and repeated after itself for bfloat's vector, with T replaced by
// bfloat and removed from its template parameters.
func (tr *translator) vecSpecializations() {
	t := tr.toks
	for i := 0; i+2 < len(t); i++ {
		sp, ok := tr.partialSpecialization(i)
		if !ok {
			continue
		}
		lt, gt, tl, p := sp.args, sp.argsEnd, sp.params, sp.paramsEnd
		// the template's type parameters, with the tokens declaring them
		params := map[string][2]int{}
		for j, from := tr.next(tl+1), tr.next(tl+1); j <= p; j = tr.next(j + 1) {
			if t[j].text == "," || j == p {
				k := tr.prev(j)
				if k > from && (t[from].text == "typename" || t[from].text == "class") && t[k].kind == tIdent {
					params[t[k].text] = [2]int{from, j}
				}
				from = tr.next(j + 1)
			}
		}
		var vecs []int // the vec tokens of vec<P, N> with a type parameter P
		var elem string
		for j := lt + 1; j < gt; j = tr.next(j + 1) {
			a := tr.next(j + 1)
			e := tr.next(a + 1)
			c := tr.next(e + 1)
			if t[j].text != "vec" || tr.isMember(j) || c >= gt || t[a].text != "<" || t[c].text != "," {
				continue
			}
			if _, ok := params[t[e].text]; !ok || elem != "" && t[e].text != elem {
				continue
			}
			elem = t[e].text
			vecs = append(vecs, j)
		}
		// vec<E, N> with a concrete element type and a template parameter N
		// (SPIRV-Cross's SpvHalfTypeSelector<vec<float, N>>) is clang's
		// vector of E, from which N is deduced
		for j := lt + 1; j < gt; j = tr.next(j + 1) {
			a := tr.next(j + 1)
			e := tr.next(a + 1)
			c := tr.next(e + 1)
			n := tr.next(c + 1)
			g := tr.next(n + 1)
			if t[j].text != "vec" || tr.isMember(j) || g >= gt || t[a].text != "<" || t[c].text != "," || t[g].text != ">" {
				continue
			}
			if _, ok := params[t[e].text]; ok || t[e].kind != tIdent || strings.HasPrefix(t[e].text, "bfloat") || !tr.hasIdent(t[n].text, tl, p) {
				continue
			}
			tr.repls = append(tr.repls, replacement{start: t[j].start, end: t[j].end, text: "__pm_ext"})
		}
		if len(vecs) == 0 {
			continue
		}
		end, ok := tr.definitionEnd(gt)
		if !ok {
			continue
		}
		start := t[tr.prev(tl)].start
		span := tr.src[start:t[end].end]
		// the copy for bfloat: T becomes bfloat, vec<T, becomes __pm_bfvec<
		var extra []replacement
		skip := map[int]bool{}
		for _, j := range vecs {
			a, b, c := tr.next(j+1), tr.next(tr.next(j+1)+1), tr.next(tr.next(tr.next(j+1)+1)+1)
			extra = append(extra, replacement{start: t[j].start, end: t[c].end, text: "__pm_bfvec<"})
			skip[a], skip[b], skip[c] = true, true, true
		}
		decl := params[elem]
		extra = append(extra, replacement{start: t[decl[0]].start, end: t[decl[1]].start, text: ""})
		if decl[1] == p { // the last parameter: drop the comma before it
			if c := tr.prev(decl[0]); t[c].text == "," {
				extra[len(extra)-1].start = t[c].start
			}
		} else {
			extra[len(extra)-1].end = t[decl[1]].end
		}
		for j := tl + 1; j <= end; j++ {
			if t[j].attr < 0 && !skip[j] && t[j].text == elem && (j < decl[0] || j >= decl[1]) && !tr.isMember(j) {
				extra = append(extra, replacement{start: t[j].start, end: t[j].end, text: "bfloat"})
			}
		}
		copied, ok := tr.applyRange(start, t[end].end, extra, regexp.MustCompile(`\b`+elem+`\b`), "bfloat")
		if !ok || strings.Contains(span, "#") {
			continue
		}
		for _, j := range vecs {
			tr.repls = append(tr.repls, replacement{start: t[j].start, end: t[j].end, text: "__pm_ext"})
		}
		tr.repls = append(tr.repls, replacement{start: t[end].end, end: t[end].end, text: " " + strings.ReplaceAll(copied, "\n", " ")})
		i = end
	}
}

// hasIdent reports whether an identifier token from..to is name.
func (tr *translator) hasIdent(name string, from, to int) bool {
	for k := from; k <= to; k++ {
		if tr.toks[k].kind == tIdent && tr.toks[k].text == name {
			return true
		}
	}
	return false
}

// applyRange returns the source between start and end with the
// replacements inside it made, and extra ones, which win over those they
// overlap, whose texts have re replaced by with instead; ok is false when a
// replacement crosses the range's bounds.
func (tr *translator) applyRange(start, end int, extra []replacement, re *regexp.Regexp, with string) (string, bool) {
	var rs []replacement
	for _, r := range tr.repls {
		switch {
		case r.start == r.end && (r.start < start || r.start >= end):
			continue
		case r.start != r.end && (r.end <= start || r.start >= end):
			continue
		case r.start < start || r.end > end:
			return "", false
		}
		overlaps := false
		for _, x := range extra {
			overlaps = overlaps || r.start < x.end && x.start < r.end || r.start == r.end && r.start > x.start && r.start < x.end
		}
		if !overlaps {
			rs = append(rs, replacement{start: r.start, end: r.end, text: re.ReplaceAllString(r.text, with)})
		}
	}
	return tr.splice(start, end, append(rs, extra...)), true
}

// splice returns the source between start and end with the replacements
// rs (all inside it) made, in order of their starts; of two overlapping,
// the one starting first wins.
func (tr *translator) splice(start, end int, rs []replacement) string {
	sort.SliceStable(rs, func(a, b int) bool { return rs[a].start < rs[b].start })
	var b strings.Builder
	pos := start
	for _, r := range rs {
		if r.start < pos {
			continue
		}
		b.WriteString(tr.src[pos:r.start])
		b.WriteString(r.text)
		pos = r.end
	}
	b.WriteString(tr.src[pos:end])
	return b.String()
}

// ternaryColon reports whether the ':' at i is a conditional operator's (a
// '?' precedes it in the same statement and brackets), not a label's, a
// base or member initializer list's or half of '::'.
func (tr *translator) ternaryColon(i int) bool {
	t := tr.toks
	if i > 0 && t[i-1].text == ":" && t[i-1].end == t[i].start || i+1 < len(t) && t[i+1].text == ":" && t[i+1].start == t[i].end {
		return false
	}
	depth := 0
	for j := tr.prev(i); j >= 0; j = tr.prev(j) {
		switch t[j].text {
		case ")", "]":
			depth++
		case "(", "[":
			if depth == 0 {
				return false
			}
			depth--
		case "?":
			if depth == 0 {
				return true
			}
		case ";", "{", "}":
			return false
		}
	}
	return false
}

// rewriteThreadgroupReinterpret writes reinterpret_cast<threadgroup T*>(p)
// as __pm_reinterpret<threadgroup T*>(p), a C-style cast: a threadgroup
// pointer to a struct may be in the generic address space here (see
// __pm_threadgroup), which reinterpret_cast cannot leave (MLX's steel
// mma: reinterpret_cast<threadgroup const float*>(As) of complex64_t
// tiles); the address is the same.
func (tr *translator) rewriteThreadgroupReinterpret(i int) {
	t := tr.toks
	lt, gt := tr.angleBrackets(i)
	if gt < 0 || t[gt].text != ">" || t[tr.prev(gt)].text != "*" {
		return
	}
	for j := lt + 1; j < gt; j++ {
		if t[j].attr < 0 && t[j].text == "threadgroup" {
			tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[i].end, text: "__pm_reinterpret"})
			return
		}
	}
}

// templateArity returns how many template arguments the template
// parameter list between the '<' at lt and the '>' at gt takes, at least
// (without its defaulted parameters) and at most (a parameter pack takes
// any number), and which of its parameters are types.
func (tr *translator) templateArity(lt, gt int) (int, int, []bool) {
	t := tr.toks
	if tr.next(lt+1) >= gt {
		return 0, 0, nil
	}
	n, defaults, pack, depth := 1, 0, false, 0
	types := []bool{false}
	first := true
	for k := lt + 1; k < gt; k++ {
		if t[k].attr >= 0 {
			continue
		}
		if first {
			types[n-1] = t[k].text == "typename" || t[k].text == "class"
			first = false
		}
		switch t[k].text {
		case "<", "(", "[", "{":
			depth++
		case ">", ")", "]", "}":
			depth--
		case ",":
			if depth == 0 {
				n++
				types = append(types, false)
				first = true
			}
		case "=":
			if depth == 0 {
				defaults++
			}
		case "...":
			pack = true
		}
	}
	if pack {
		return n - 1 - defaults, 1 << 30, types
	}
	return n - defaults, n, types
}

// templateArgs returns, for each template argument the name at target
// (followed by <...> ending at or before targetEnd) is given, whether it is
// a literal (a number, true or false).
func (tr *translator) templateArgs(target, targetEnd int) []bool {
	t := tr.toks
	lt := tr.next(target + 1)
	if lt > targetEnd || t[lt].text != "<" {
		return nil
	}
	gt := tr.match(lt)
	if gt < 0 || tr.next(lt+1) == gt {
		return nil
	}
	var literal []bool
	depth, start := 0, tr.next(lt+1)
	for k := lt + 1; k <= gt; k++ {
		if t[k].attr >= 0 {
			continue
		}
		switch t[k].text {
		case "<", "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case ">":
			if k != gt {
				depth--
				continue
			}
		}
		if k == gt || depth == 0 && t[k].text == "," {
			lit := false
			if start < k && tr.next(start+1) == k {
				lit = t[start].kind == tNumber || t[start].text == "true" || t[start].text == "false"
			}
			literal = append(literal, lit)
			start = tr.next(k + 1)
		}
	}
	return literal
}

// definitionEnd returns the last token of the definition whose head ends
// at token i: the '}' of the first brace after it, or the ';' right after
// that brace; ok is false for a declaration (a ';' comes first) or an
// unbalanced brace.
func (tr *translator) definitionEnd(i int) (end int, ok bool) {
	t := tr.toks
	open := tr.next(i + 1)
	for open < len(t) && t[open].text != "{" && t[open].text != ";" {
		open = tr.next(open + 1)
	}
	if open >= len(t) || t[open].text != "{" {
		return 0, false
	}
	if end = tr.match(open); end < 0 {
		return 0, false
	}
	if n := tr.next(end + 1); n < len(t) && t[n].text == ";" {
		end = n
	}
	return end, true
}
