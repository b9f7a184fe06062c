package msl

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// FunctionConstant is a function constant a kernel uses:
// constant T name [[function_constant(index)]];
type FunctionConstant struct {
	Name  string
	Index int
	// Type is the declared MSL type, such as "bool", "short" or "float".
	Type string
	// Required is false for a constant the source tests with
	// is_function_constant_defined(name): only such constants may be left
	// without a value.
	Required bool
}

// ConstantValue is a value given to a function constant, as
// MTLFunctionConstantValues holds them: by index (Index >= 0) or by name
// (Index < 0). Values by index are looked up first, then by name.
type ConstantValue struct {
	Index int
	Name  string
	// Type is the MSL scalar type of the value: bool, char, uchar, short,
	// ushort, int, uint, long, ulong, half, bfloat or float.
	Type string
	// Bytes is the value in memory (little endian), as large as Type.
	Bytes []byte
}

// constantTypes are the scalar types a function constant may have here,
// with their sizes; the aliases name the same types.
var (
	constantTypes = map[string]int{"bool": 1, "char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4,
		"long": 8, "ulong": 8, "half": 2, "bfloat": 2, "float": 4}
	typeAliases = map[string]string{"int8_t": "char", "uint8_t": "uchar", "int16_t": "short", "uint16_t": "ushort",
		"int32_t": "int", "uint32_t": "uint", "int64_t": "long", "uint64_t": "ulong", "unsigned char": "uchar",
		"unsigned short": "ushort", "unsigned int": "uint", "unsigned": "uint", "unsigned long": "ulong",
		"signed char": "char", "bfloat16_t": "bfloat"}
)

func canonicalType(t string) string {
	var words []string
	for _, w := range strings.Fields(t) {
		// qualifiers, not the type: static constant constexpr const bool
		// (MLX's fft: STEEL_CONST bool inv_ [[function_constant(0)]])
		if w != "const" && w != "constexpr" && w != "static" && w != "volatile" {
			words = append(words, w)
		}
	}
	t = strings.Join(words, " ")
	if a, ok := typeAliases[t]; ok {
		return a
	}
	return t
}

// functionConstantDecl rewrites a namespace-scope
// `constant T name [[function_constant(index)]];` starting at token i (the
// constant keyword) and returns the index of its ';'. Other constant
// declarations are left alone.
func (tr *translator) functionConstantDecl(i int) int {
	t := tr.toks
	end := i
	var fc *attrItem
	for end < len(t) {
		if a := t[end].attr; a >= 0 {
			for k, it := range tr.attrs[a].items {
				if it.name == "function_constant" {
					fc = &tr.attrs[a].items[k]
				}
			}
			end = tr.attrs[a].last + 1
			continue
		}
		if s := t[end].text; s == ";" || s == "{" || s == "=" || s == "(" {
			break
		}
		end++
	}
	if fc == nil || end >= len(t) || t[end].text != ";" {
		return i
	}
	nameIdx := tr.prev(end)
	if nameIdx <= i || t[nameIdx].kind != tIdent {
		tr.errorf(t[i].line, t[i].col, "function constant declaration without a name")
		return end
	}
	name := t[nameIdx].text
	if len(fc.args) != 1 {
		tr.errorf(fc.line, fc.col, "function_constant of %s takes one index", name)
		return end
	}
	idx, ok := evalIndex(fc.args[0])
	if !ok || idx < 0 || idx > 65535 {
		tr.errorf(fc.line, fc.col, "function_constant index of %s must be an integer constant between 0 and 65535, not %s", name, fc.args[0])
		return end
	}
	typ := canonicalType(tr.text(i+1, nameIdx))
	for _, o := range tr.constants {
		if o.Index == idx {
			tr.errorf(t[nameIdx].line, t[nameIdx].col, "function constants %s and %s have the same index %d", o.Name, name, idx)
			return end
		}
	}
	tr.constants = append(tr.constants, FunctionConstant{Name: name, Index: idx, Type: typ, Required: true})
	value, defined := "", false
	if v := tr.values.lookup(idx, name); v != nil {
		// a value that does not fit is an error of the functions using
		// the constant (Library.Specialize), not of the library
		if lit, err := constantLiteral(typ, *v); err == nil {
			value, defined = lit, true
		}
	}
	if !defined {
		value = typ + "()"
		if _, ok := constantTypes[typ]; !ok {
			value = "{}"
		}
	}
	span := tr.src[t[i].start:t[end].end]
	text := fmt.Sprintf("static constexpr %s %s = %s; static constexpr bool __pm_fcd_%s = %v;%s",
		tr.text(i+1, nameIdx), name, value, name, defined, strings.Repeat("\n", strings.Count(span, "\n")))
	tr.dropInside(t[i].start, t[end].end)
	tr.repls = append(tr.repls, replacement{start: t[i].start, end: t[end].end, text: text})
	return end
}

type constantValues []ConstantValue

// lookup finds the value of the constant index, else of name.
func (vs constantValues) lookup(index int, name string) *ConstantValue {
	for i := range vs {
		if vs[i].Index >= 0 && vs[i].Index == index {
			return &vs[i]
		}
	}
	for i := range vs {
		if vs[i].Index < 0 && vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}

// constantLiteral is the C++ expression of value v for a constant of type
// typ, bit-exact.
func constantLiteral(typ string, v ConstantValue) (string, error) {
	size, ok := constantTypes[typ]
	if !ok {
		return "", fmt.Errorf("a function constant of type %s is not supported by the emulated device (scalar types only)", typ)
	}
	if canonicalType(v.Type) != typ {
		return "", fmt.Errorf("the constant is a %s; the value given is a %s", typ, v.Type)
	}
	if len(v.Bytes) != size {
		return "", fmt.Errorf("a %s value is %d bytes, not %d", typ, size, len(v.Bytes))
	}
	var u uint64
	for i := size - 1; i >= 0; i-- {
		u = u<<8 | uint64(v.Bytes[i])
	}
	switch typ {
	case "bool":
		return strconv.FormatBool(u != 0), nil
	case "float":
		return fmt.Sprintf("__builtin_bit_cast(float, 0x%08xu)", u), nil
	case "half":
		return fmt.Sprintf("__builtin_bit_cast(half, (ushort)0x%04x)", u), nil
	case "bfloat":
		return fmt.Sprintf("bfloat::__from_bits(0x%04x)", u), nil
	case "char", "short", "int", "long":
		s := int64(u<<(64-8*size)) >> (64 - 8*size)
		if s == math.MinInt64 {
			return fmt.Sprintf("(%s)(-9223372036854775807l - 1)", typ), nil
		}
		return fmt.Sprintf("(%s)%dl", typ, s), nil
	}
	return fmt.Sprintf("(%s)%dul", typ, u), nil
}

// evalIndex evaluates an integer constant expression of literals, + - * /
// % << >> and parentheses (what a function_constant index is after
// preprocessing, such as (600 + 1)).
func evalIndex(expr string) (int, bool) {
	toks := indexTokens(expr)
	p := &indexParser{toks: toks}
	v, ok := p.expr(0)
	if !ok || p.pos != len(toks) {
		return 0, false
	}
	return int(v), v >= math.MinInt32 && v <= math.MaxInt32
}

func indexTokens(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			out = append(out, s[i:j])
			i = j
		case strings.HasPrefix(s[i:], "<<") || strings.HasPrefix(s[i:], ">>"):
			out = append(out, s[i:i+2])
			i += 2
		default:
			out = append(out, s[i:i+1])
			i++
		}
	}
	return out
}

type indexParser struct {
	toks []string
	pos  int
}

var indexPrec = map[string]int{"<<": 1, ">>": 1, "+": 2, "-": 2, "*": 3, "/": 3, "%": 3}

func (p *indexParser) expr(minPrec int) (int64, bool) {
	l, ok := p.unary()
	if !ok {
		return 0, false
	}
	for p.pos < len(p.toks) {
		op := p.toks[p.pos]
		prec, isOp := indexPrec[op]
		if !isOp || prec < minPrec {
			break
		}
		p.pos++
		r, ok := p.expr(prec + 1)
		if !ok {
			return 0, false
		}
		switch op {
		case "+":
			l += r
		case "-":
			l -= r
		case "*":
			l *= r
		case "/", "%":
			if r == 0 {
				return 0, false
			}
			if op == "/" {
				l /= r
			} else {
				l %= r
			}
		case "<<":
			if r < 0 || r > 31 {
				return 0, false
			}
			l <<= r
		case ">>":
			if r < 0 || r > 31 {
				return 0, false
			}
			l >>= r
		}
		if l < math.MinInt32 || l > math.MaxInt32 {
			return 0, false
		}
	}
	return l, true
}

func (p *indexParser) unary() (int64, bool) {
	if p.pos >= len(p.toks) {
		return 0, false
	}
	switch t := p.toks[p.pos]; {
	case t == "(":
		p.pos++
		v, ok := p.expr(0)
		if !ok || p.pos >= len(p.toks) || p.toks[p.pos] != ")" {
			return 0, false
		}
		p.pos++
		return v, true
	case t == "-" || t == "+":
		p.pos++
		v, ok := p.unary()
		if t == "-" {
			v = -v
		}
		return v, ok
	case t[0] >= '0' && t[0] <= '9':
		p.pos++
		v, err := strconv.ParseInt(strings.TrimRight(t, "uUlL"), 0, 64)
		return v, err == nil && v <= math.MaxInt32
	}
	return 0, false
}

// decl is one namespace-scope declaration: the names it defines and the
// identifiers it mentions.
type decl struct {
	first, last int
	owners      []string
	idents      map[string]bool
}

// declarations splits the namespace-scope source into declarations, and
// marks the constants tested with is_function_constant_defined optional.
func (tr *translator) declarations() []decl {
	t := tr.toks
	var out []decl
	depth := 0 // braces other than namespaces'
	var nsDepth []int
	start := 0
	finish := func(last int) {
		if last < start {
			start = last + 1
			return
		}
		d := decl{first: start, last: last, idents: map[string]bool{}}
		d.owners = tr.ownersOf(start, last)
		for k := start; k <= last; k++ {
			if a := t[k].attr; a >= 0 {
				if k == tr.attrs[a].first {
					for _, it := range tr.attrs[a].items {
						if it.name == "function_constant" && len(it.args) == 1 {
							d.idents[it.args[0]] = true
						}
					}
				}
				continue
			}
			if t[k].kind != tIdent {
				continue
			}
			if t[k].text == "is_function_constant_defined" {
				if a, b, c := tr.next(k+1), 0, 0; a < len(t) && t[a].text == "(" {
					b = tr.next(a + 1)
					c = tr.next(b + 1)
					if c < len(t) && t[c].text == ")" && t[b].kind == tIdent {
						tr.optional[t[b].text] = true
						k = c
						continue
					}
				}
			}
			d.idents[t[k].text] = true
		}
		out = append(out, d)
		start = last + 1
	}
	for i := 0; i < len(t); i++ {
		if t[i].attr >= 0 {
			continue
		}
		switch t[i].text {
		case "{":
			p := tr.prev(i)
			if depth == 0 && p >= 0 && (t[p].text == "namespace" || t[p].kind == tIdent && tr.prev(p) >= 0 && t[tr.prev(p)].text == "namespace") {
				nsDepth = append(nsDepth, depth)
				start = i + 1
				continue
			}
			depth++
		case "}":
			if depth == 0 && len(nsDepth) > 0 {
				nsDepth = nsDepth[:len(nsDepth)-1]
				start = i + 1
				continue
			}
			depth--
			if depth < 0 {
				depth = 0
			}
			if depth == 0 {
				if n := tr.next(i + 1); n < len(t) && t[n].text == ";" {
					continue
				}
				// a struct followed by declarators continues to its ';'
				if n := tr.next(i + 1); n < len(t) && t[n].kind == tIdent && tr.isTypeBody(start, i) {
					continue
				}
				finish(i)
			}
		case ";":
			if depth == 0 {
				finish(i)
			}
		}
	}
	return out
}

// isTypeBody reports whether the declaration from first to the brace at
// last defines a struct, class, union or enum.
func (tr *translator) isTypeBody(first, last int) bool {
	for k := first; k < last; k++ {
		switch tr.toks[k].text {
		case "struct", "class", "union", "enum":
			return true
		case "(", "=":
			return false
		}
	}
	return false
}

// ownersOf returns the names a declaration defines: a function's name, a
// type's name, a variable's or a typedef's.
func (tr *translator) ownersOf(first, last int) []string {
	t := tr.toks
	var owners []string
	depth := 0
	lastIdent := ""
	for k := first; k <= last; k++ {
		if t[k].attr >= 0 {
			continue
		}
		switch s := t[k].text; {
		case s == "struct" || s == "class" || s == "union" || s == "enum":
			if n := tr.next(k + 1); n <= last && t[n].kind == tIdent {
				owners = append(owners, t[n].text)
			}
		case s == "(" && depth == 0:
			if lastIdent != "" && !notOwners[lastIdent] {
				owners = append(owners, lastIdent)
			}
			return owners
		case s == "<" && depth == 0:
			// template parameters, or the template arguments after a
			// name (template void f<float>(...) declares f, not float)
			if m := tr.match(k); m > 0 && m <= last {
				k = m
			}
		case s == "{":
			depth++
		case s == "}":
			depth--
		case (s == "=" || s == ";" || s == "[") && depth == 0:
			if lastIdent != "" {
				owners = append(owners, lastIdent)
			}
			return owners
		case t[k].kind == tIdent && depth == 0:
			lastIdent = s
		}
	}
	return owners
}

// notOwners are the keywords before a parenthesis that declare nothing:
// an explicit instantiation template ... decltype(f<T>) f<T>; declares no
// function named decltype (which every instantiation would reach).
var notOwners = map[string]bool{"decltype": true, "sizeof": true, "alignof": true, "static_assert": true, "alignas": true}

// resolveConstants lists, for every entry point, the function constants
// its code can reach: those named in its declaration or, transitively, in
// the declarations of the names it mentions.
func (tr *translator) resolveConstants() {
	if len(tr.constants) == 0 {
		return
	}
	decls := tr.declarations()
	byOwner := map[string][]int{}
	for i, d := range decls {
		for _, o := range d.owners {
			byOwner[o] = append(byOwner[o], i)
		}
	}
	for i := range tr.constants {
		tr.constants[i].Required = !tr.optional[tr.constants[i].Name]
	}
	for ei := range tr.entries {
		e := &tr.entries[ei]
		seen := map[int]bool{}
		var queue []int
		for i, d := range decls {
			if d.first <= e.tok && e.tok <= d.last {
				queue = append(queue, i)
				seen[i] = true
			}
		}
		reached := map[string]bool{}
		for len(queue) > 0 {
			d := decls[queue[0]]
			queue = queue[1:]
			for id := range d.idents {
				if reached[id] {
					continue
				}
				reached[id] = true
				for _, j := range byOwner[id] {
					if !seen[j] {
						seen[j] = true
						queue = append(queue, j)
					}
				}
			}
		}
		for _, c := range tr.constants {
			if reached[c.Name] {
				e.constants = append(e.constants, c)
			}
		}
		sort.Slice(e.constants, func(a, b int) bool { return e.constants[a].Index < e.constants[b].Index })
	}
}
