package msl

// integerTypeNames are MSL's integer scalar types, by the names a
// declaration gives them.
var integerTypeNames = map[string]bool{
	"char": true, "uchar": true, "short": true, "ushort": true, "int": true, "uint": true, "long": true, "ulong": true,
	"int8_t": true, "uint8_t": true, "int16_t": true, "uint16_t": true, "int32_t": true, "uint32_t": true,
	"int64_t": true, "uint64_t": true, "size_t": true, "ptrdiff_t": true, "unsigned": true, "signed": true,
}

// bfloatIntegerInits lets a bfloat initialize or be assigned to an integer
// variable (uint8_t q = b; q = b;), which MSL converts implicitly. bfloat
// is a class here that converts to an integer only by a cast, so that c ?
// b : 0 is a bfloat rather than ambiguous; in a program naming bfloat, the
// value of such a declaration (an integer type's name, a name, =) in a
// function body, and of an assignment statement to a variable declared
// so before it, is written __pm_int(value) (rt/include/prelude.h), which
// turns a bfloat into what converts to an integer and passes every other
// value through as it is.
func (tr *translator) bfloatIntegerInits() {
	t := tr.toks
	if !tr.namesBfloat() {
		return
	}
	existing := len(tr.repls)
	ints := map[string]bool{} // the names declared with an integer type so far
	depth := 0
	for i := 0; i+2 < len(t); i++ {
		switch t[i].text {
		case "{":
			depth++
		case "}":
			depth--
		}
		if t[i].attr >= 0 || depth == 0 || t[i].kind != tIdent {
			continue
		}
		eq := tr.next(i + 1)
		if eq >= len(t) || t[eq].text != "=" || eq+1 >= len(t) || t[eq+1].text == "=" && t[eq+1].start == t[eq].end {
			continue
		}
		p := tr.prev(i)
		if p < 0 {
			continue
		}
		decl := integerTypeNames[t[p].text] && !tr.isMember(p)
		switch {
		case decl:
			if tr.constantDeclaration(p) {
				continue
			}
			ints[t[i].text] = true
		case ints[t[i].text] && (t[p].text == ";" || t[p].text == "{" || t[p].text == "}"):
		default:
			continue
		}
		end := tr.conditionalEnd(eq+1, false)
		if end < 0 || end == eq+1 || tr.anyToken(eq+1, end, "<") {
			continue // none, or a template's arguments may hold the comma
		}
		// the names the rest of the declaration declares (int a = b, c;)
		for k := end; decl && k+1 < len(t) && t[k].text == ","; {
			ints[t[k+1].text] = true
			if k = tr.next(k + 2); k < len(t) && t[k].text == "=" {
				k = tr.conditionalEnd(k+1, false)
			}
			if k < 0 {
				break
			}
		}
		group := []replacement{{start: t[eq].end, end: t[eq].end, text: " __pm_int("},
			{start: t[end].start, end: t[end].start, text: ")"}}
		if !tr.overlapsRepls(group, existing) {
			tr.repls = append(tr.repls, group...)
		}
	}
}

// constantDeclaration reports whether the declaration specifiers ending at
// token p (the type) include constexpr, static or constant: a value that
// may have to be a constant expression is left as it is.
func (tr *translator) constantDeclaration(p int) bool {
	for q := tr.prev(p); q >= 0 && tr.toks[q].kind == tIdent; q = tr.prev(q) {
		switch tr.toks[q].text {
		case "constexpr", "static", "constant":
			return true
		}
	}
	return false
}

// anyToken reports whether a token from..to-1 is text.
func (tr *translator) anyToken(from, to int, text string) bool {
	for k := from; k < to; k++ {
		if tr.toks[k].text == text {
			return true
		}
	}
	return false
}
