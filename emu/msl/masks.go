package msl

// Comparisons of vectors yield int vectors here (0 or -1 per component),
// where MSL's yield bool vectors that convert to 1 for true: float4(a > b)
// is 1.0 where a > b. The translator marks a comparison that is the whole
// operand of a conversion to a vector type (float4(a > b), (float4)(a > b),
// and T(x > 0) or (T)(x > 0) through a template parameter or typedef, as
// ggml's leaky ReLU writes TC(x > 0)*x) as __pm_mask(a > b): a mask that
// the conversion turns into 0 and 1. A comparison of scalars stays a bool.

// maskComparison wraps the operand of the conversion whose parentheses are
// tokens open and end in __pm_mask(...) when it is a comparison.
func (tr *translator) maskComparison(open, end int) {
	if open < 0 || end <= open || tr.toks[open].text != "(" || !tr.topLevelComparison(open, end) {
		return
	}
	t := tr.toks
	tr.repls = append(tr.repls, replacement{start: t[open].end, end: t[open].end, text: "__pm_mask("},
		replacement{start: t[end].start, end: t[end].start, text: ")"})
}

// topLevelComparison reports whether the tokens between the parentheses
// open and end are a comparison: a relational or equality operator outside
// nested brackets, and no operator binding looser than it (?:, &&, ||, &,
// |, ^, assignment, comma). Tokens are single characters: <= is < and =
// side by side; a < followed by a > and then (, :: or { is a template's
// argument list.
func (tr *translator) topLevelComparison(open, end int) bool {
	t := tr.toks
	adjacent := func(a, b int) bool { return a > open && b < end && t[a].end == t[b].start }
	found, depth := false, 0
	for j := tr.next(open + 1); j < end; j = tr.next(j + 1) {
		switch t[j].text {
		case "(", "[", "{":
			depth++
			continue
		case ")", "]", "}":
			depth--
			continue
		}
		if depth != 0 || t[j].kind != tPunct {
			continue
		}
		next := ""
		if j+1 < end {
			next = t[j+1].text
		}
		switch t[j].text {
		case "?", ",", ";", "&", "|", "^":
			return false
		case "=":
			if adjacent(j-1, j) && (t[j-1].text == "<" || t[j-1].text == ">" || t[j-1].text == "=" || t[j-1].text == "!") {
				continue // the = of <=, >=, ==, !=
			}
			if next == "=" && adjacent(j, j+1) {
				found = true
				j++
				continue
			}
			return false // an assignment
		case "!":
			if next == "=" && adjacent(j, j+1) {
				found = true
				j++
			}
		case "<":
			if next == "<" && adjacent(j, j+1) {
				j++ // <<
				continue
			}
			if k := tr.templateArgsEnd(j, end); k > 0 {
				j = k
				continue
			}
			found = true
		case ">":
			if adjacent(j-1, j) && t[j-1].text == "-" {
				continue // ->
			}
			if next == ">" && adjacent(j, j+1) {
				j++ // >>
				continue
			}
			found = true
		}
	}
	return found
}

// templateArgsEnd returns the index of the > closing a template argument
// list opened by the < at lt (after a name, and followed by (, :: or {),
// or -1 if that < is no such list's.
func (tr *translator) templateArgsEnd(lt, end int) int {
	t := tr.toks
	if p := tr.prev(lt); p < 0 || t[p].kind != tIdent {
		return -1
	}
	angles, depth := 0, 0
	for j := lt; j < end; j = tr.next(j + 1) {
		switch t[j].text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case "<":
			if depth == 0 {
				angles++
			}
		case ">":
			if depth != 0 {
				continue
			}
			if angles--; angles == 0 {
				n := tr.next(j + 1)
				if n < len(t) && (t[n].text == "(" || t[n].text == "{" || t[n].text == ":" && n+1 < len(t) && t[n+1].text == ":") {
					return j
				}
				return -1
			}
		case "?", ";", "&", "|":
			if depth == 0 {
				return -1
			}
		}
	}
	return -1
}
