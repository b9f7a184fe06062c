package msl

// In MSL, c ? x : y with a bfloat and a float operand is a float (the usual
// arithmetic conversions, bfloat being a floating-point type); here bfloat
// is a class converting implicitly to float and from float, which C++
// finds ambiguous in a conditional expression (candle's affine.metal:
// (x > 0) ? x : mul * (exp(x) - 1) with x a bfloat). In a program that
// names bfloat, the translator writes the operands of each conditional
// expression through __PM_ARMS (rt/include/prelude.h), which converts the
// bfloat operand to float where the other is a float or half and leaves
// every other operand as it is.

// bfloatConditionals rewrites the conditional expressions of a program
// using bfloat.
func (tr *translator) bfloatConditionals() {
	t := tr.toks
	if !tr.namesBfloat() {
		return
	}
	existing := len(tr.repls)
	// from the last: a nested conditional expression ending where the
	// enclosing one does closes first
	for q := len(t) - 1; q >= 0; q-- {
		if t[q].text != "?" || t[q].kind != tPunct || t[q].attr >= 0 {
			continue
		}
		colon := tr.conditionalEnd(q+1, true)
		if colon < 0 {
			continue
		}
		end := tr.conditionalEnd(colon+1, false)
		if end < 0 || colon == q+1 || end == colon+1 || tr.lambdaIn(q+1, colon) || tr.lambdaIn(colon+1, end) {
			continue
		}
		if tr.inTemplateArgs(q) {
			continue // a constant expression: Foo<N, c ? A : B>
		}
		litA := colon == q+2 && t[q+1].kind == tNumber
		litB := end == colon+2 && t[colon+1].kind == tNumber
		aText, bText := tr.literalText(q+1), tr.literalText(colon+1)
		var group []replacement
		switch {
		case litA && litB:
		case litA:
			group = append(group, replacement{start: t[colon].end, end: t[colon].end, text: " __PM_ARM(("},
				replacement{start: t[end-1].end, end: t[end-1].end, text: "), (" + aText + "))"})
		case litB:
			group = append(group, replacement{start: t[q].end, end: t[q].end, text: " __PM_ARM(("},
				replacement{start: t[colon].start, end: t[colon].end, text: "), (" + bText + ")) :"})
		default:
			group = append(group, replacement{start: t[q].end, end: t[q].end, text: " __PM_ARMS(("},
				replacement{start: t[colon].start, end: t[colon].end, text: "), ("},
				replacement{start: t[end-1].end, end: t[end-1].end, text: "))"})
		}
		if !tr.overlapsRepls(group, existing) {
			tr.repls = append(tr.repls, group...)
		}
	}
}

// namesBfloat reports whether the program names bfloat.
func (tr *translator) namesBfloat() bool {
	for _, k := range tr.toks {
		if k.kind == tIdent && k.text == "bfloat" {
			return true
		}
	}
	return false
}

// overlapsRepls reports whether a replacement of group falls inside one
// of the first n replacements of other rewrites (which would leave the
// group applied in part).
func (tr *translator) overlapsRepls(group []replacement, n int) bool {
	for _, g := range group {
		for _, r := range tr.repls[:n] {
			if r.end > r.start && r.start < g.end && g.start < r.end && !(g.start == g.end && (g.start == r.start || g.start == r.end)) {
				return true
			}
			if r.end == r.start && g.end > g.start && g.start < r.start && r.start < g.end {
				return true
			}
		}
	}
	return false
}

// literalText is token k's text as the translation writes it (a number
// given a float suffix, or a half literal's).
func (tr *translator) literalText(k int) string {
	start, end := tr.toks[k].start, tr.toks[k].end
	var in []replacement
	for _, r := range tr.repls {
		if r.start >= start && r.end <= end {
			in = append(in, r)
		}
	}
	return tr.splice(start, end, in)
}

// inTemplateArgs reports whether the '?' at q is inside a template
// argument list: a '<' before it, in the same brackets and statement,
// closed by a '>' after it there.
func (tr *translator) inTemplateArgs(q int) bool {
	t := tr.toks
	depth := 0
	lt := -1
	for j := q - 1; j >= 0 && lt < 0; j-- {
		switch t[j].text {
		case ")", "]", "}":
			depth++
		case "(", "[", "{":
			if depth == 0 {
				return false
			}
			depth--
		case ";":
			return false
		case "<":
			if depth == 0 && j > 0 && t[j-1].kind == tIdent {
				lt = j
			}
		}
	}
	if lt < 0 {
		return false
	}
	depth = 0
	for j := q + 1; j < len(t); j++ {
		switch t[j].text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth == 0 {
				return false
			}
			depth--
		case ";":
			return false
		case ">":
			if depth == 0 && !(t[j-1].text == "-" && t[j-1].end == t[j].start) {
				return true
			}
		}
	}
	return false
}

// conditionalEnd scans from token i for the end of a conditional
// expression's operand: with colon, the ':' ending its second operand;
// else the token ending its third (a ',', ';', a closing bracket or the
// ':' of an enclosing conditional expression). Nested conditional
// expressions are passed over; it returns -1 where the operand does not
// end as an expression's would.
func (tr *translator) conditionalEnd(i int, colon bool) int {
	t := tr.toks
	depth, nested := 0, 0
	for j := i; j < len(t); j++ {
		if t[j].attr >= 0 {
			return -1
		}
		switch t[j].text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth == 0 {
				if colon {
					return -1
				}
				return j
			}
			depth--
		case ";":
			if colon || depth != 0 {
				return -1
			}
			return j
		case ",":
			if depth == 0 {
				if colon {
					return -1
				}
				return j
			}
		case "?":
			if depth == 0 {
				nested++
			}
		case ":":
			if j+1 < len(t) && t[j+1].text == ":" && t[j+1].start == t[j].end {
				j++ // ::
				continue
			}
			if depth != 0 {
				continue
			}
			if nested > 0 {
				nested--
				continue
			}
			return j
		}
	}
	return -1
}

// lambdaIn reports whether tokens from to end hold a lambda expression
// (a ']' followed by '(' or '{'), which C++17 does not allow in the
// decltype the rewrite writes.
func (tr *translator) lambdaIn(from, end int) bool {
	t := tr.toks
	for j := from; j+1 < end; j++ {
		if t[j].text == "]" && (t[j+1].text == "(" || t[j+1].text == "{") {
			return true
		}
	}
	return false
}
