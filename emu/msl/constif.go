package msl

// In MSL, bfloat is a scalar type converting implicitly to every other
// scalar type, so an assignment of a bfloat to an integer compiles. Here
// bfloat is a class whose conversion to an integer is explicit (so that
// c ? b : 0 is a bfloat rather than ambiguous), and such an assignment does
// not compile, also in a branch its template never takes: MLX's sort
// (KernelMergeSort<T, U, ARG_SORT, ...>::block_sort: if (ARG_SORT) out[i]
// = tgp_idxs[i]; else out[i] = tgp_vals[i];, with T bfloat and U uint for
// an arg-sort). An if whose whole condition is a bool template parameter
// (or its negation) of an enclosing template is therefore written
// if constexpr: the same branch runs, and the branch the instantiation
// never takes is not instantiated, as a template's discarded statement.

// templateConditions writes if (P) and if (!P), P a bool template
// parameter of a template enclosing the if, as if constexpr.
func (tr *translator) templateConditions() {
	t := tr.toks
	done := map[int]bool{}
	for i := 0; i < len(t); i++ {
		lt, gt := tr.templateParams(i)
		if gt < 0 {
			continue
		}
		params := tr.boolTemplateParams(lt, gt)
		if len(params) == 0 {
			continue
		}
		open, end := tr.templateBody(gt)
		if open < 0 {
			continue
		}
		for j := open + 1; j < end; j++ {
			if t[j].attr >= 0 || t[j].kind != tIdent || t[j].text != "if" || done[j] || tr.isMember(j) {
				continue
			}
			lp := tr.next(j + 1)
			if lp >= len(t) || t[lp].text != "(" {
				continue
			}
			k := tr.next(lp + 1)
			if k < len(t) && t[k].text == "!" {
				k = tr.next(k + 1)
			}
			if k >= len(t) || t[k].kind != tIdent || !params[t[k].text] {
				continue
			}
			if rp := tr.next(k + 1); rp >= len(t) || t[rp].text != ")" {
				continue
			}
			done[j] = true
			tr.repls = append(tr.repls, replacement{start: t[j].end, end: t[j].end, text: " constexpr"})
		}
	}
}

// boolTemplateParams returns the names of the bool parameters of the
// template parameter list between lt and gt.
func (tr *translator) boolTemplateParams(lt, gt int) map[string]bool {
	t := tr.toks
	params := map[string]bool{}
	for _, item := range tr.listItems(lt, gt) {
		var seg []int // the parameter's tokens
		for k := tr.next(item[0]); k < item[1]; k = tr.next(k + 1) {
			seg = append(seg, k)
		}
		// bool P or bool P = default
		if len(seg) >= 2 && t[seg[0]].text == "bool" && t[seg[1]].kind == tIdent && (len(seg) == 2 || t[seg[2]].text == "=") {
			params[t[seg[1]].text] = true
		}
	}
	return params
}

// templateParams returns the angle brackets of the template parameter
// list after the keyword template at token i (lt at '<', gt at its match),
// or -1, -1 where token i is not the keyword or has no list.
func (tr *translator) templateParams(i int) (lt, gt int) {
	t := tr.toks
	if t[i].attr >= 0 || t[i].kind != tIdent || t[i].text != "template" {
		return -1, -1
	}
	lt = tr.next(i + 1)
	if lt >= len(t) || t[lt].text != "<" {
		return -1, -1
	}
	return lt, tr.match(lt)
}

// templateBody returns the braces of the body of the declaration that
// follows the template parameter list ending at gt (a class's or a
// function's), passing over parentheses, brackets and the braces of
// default arguments inside them; open is -1 for a declaration without one.
func (tr *translator) templateBody(gt int) (open, end int) {
	t := tr.toks
	for k := tr.next(gt + 1); k < len(t); k = tr.next(k + 1) {
		switch t[k].text {
		case "(", "[":
			if k = tr.match(k); k < 0 {
				return -1, -1
			}
		case ";":
			return -1, -1
		case "{":
			if end = tr.match(k); end < 0 {
				return -1, -1
			}
			return k, end
		}
	}
	return -1, -1
}
