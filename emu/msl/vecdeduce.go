package msl

import (
	"fmt"
	"strings"
)

// In MSL vec<T, N> is a vector type, from which a call deduces T; here it
// is an alias through a trait (bfloat vectors are a class), which C++
// cannot deduce T from, so a function template taking vec<T, N>, or an
// alias template naming it (MLX's steel attention: template <typename U>
// using dtype_frag_t = typename metal::vec<U, kElemsPerFrag>; and
// mma(thread frag_type& D, thread dtype_frag_t<Atype>& A, ...)), finds no
// function. Such a parameter, of a type parameter P no other parameter
// names, is written as a new type parameter deduced from the argument;
// P's default is the argument's element type (__pm_vec_elem, which a
// non-vector argument does not have), and a last defaulted parameter
// checks that the argument's type is the parameter's type as written.
// P's place among the template parameters changes, so a function whose
// name the program gives template arguments is left as written.

// vecDeductions rewrites the parameters of function templates that deduce
// a type parameter from vec<P, N> or an alias template naming it.
func (tr *translator) vecDeductions() {
	t := tr.toks
	aliases := tr.vecAliasTemplates()
	explicit := map[string]bool{} // names followed by template arguments
	for i := 0; i+1 < len(t); i++ {
		if n := tr.next(i + 1); t[i].kind == tIdent && t[i].attr < 0 && n < len(t) && t[n].text == "<" {
			explicit[t[i].text] = true
		}
	}
	serial := 0
	for i := 0; i < len(t); i++ {
		lt, gt := tr.templateParams(i)
		if gt < 0 || t[gt].text != ">" {
			continue
		}
		open, _ := tr.templateBody(gt)
		if open < 0 {
			continue
		}
		params, close, ok := tr.functionParams(gt, open)
		if !ok || explicit[t[tr.prev(params)].text] {
			continue
		}
		// the type parameters and their declarations (without defaults)
		decl := map[string][2]int{}
		var seg []int
		depth := 0
		for k := tr.next(lt + 1); k <= gt; k = tr.next(k + 1) {
			if k == gt || depth == 0 && t[k].text == "," {
				if len(seg) == 2 && (t[seg[0]].text == "typename" || t[seg[0]].text == "class") && t[seg[1]].kind == tIdent {
					decl[t[seg[1]].text] = [2]int{seg[0], seg[1]}
				}
				seg = seg[:0]
				continue
			}
			switch t[k].text {
			case "<", "(":
				depth++
			case ">", ")":
				depth--
			}
			seg = append(seg, k)
		}
		// the parameters' vec<P, N> and A<P> forms of type parameters P
		type form struct{ from, to int }
		forms := map[string][]form{}
		var order []string
		for k := params + 1; k < close; k++ {
			if t[k].attr >= 0 || t[k].kind != tIdent || tr.isMember(k) {
				continue
			}
			a := tr.next(k + 1)
			if a >= close || t[a].text != "<" {
				continue
			}
			e := tr.next(a + 1)
			end := tr.match(a)
			if end < 0 || end > close || e >= close || t[end].text != ">" {
				continue
			}
			if _, isParam := decl[t[e].text]; !isParam {
				continue
			}
			from := k
			if p := tr.prev(k); p >= 2 && t[p].text == ":" && t[p-1].text == ":" && t[p-2].text == "metal" {
				from = p - 2
			}
			switch {
			case t[k].text == "vec" && t[tr.next(e+1)].text == ",":
			case aliases[t[k].text] && tr.next(e+1) == end:
			default:
				continue
			}
			if len(forms[t[e].text]) == 0 {
				order = append(order, t[e].text)
			}
			forms[t[e].text] = append(forms[t[e].text], form{from, end})
			k = end
		}
		if len(order) == 0 {
			continue
		}
		// P must be named by no other parameter (else it is deduced there)
		deducedElsewhere := func(p string) bool {
			for k := params + 1; k < close; k++ {
				if t[k].attr >= 0 || t[k].text != p {
					continue
				}
				inside := false
				for _, f := range forms[p] {
					inside = inside || k > f.from && k < f.to
				}
				if !inside {
					return true
				}
			}
			return false
		}
		var group []replacement
		var added, checks []string
		for _, p := range order {
			if deducedElsewhere(p) {
				continue
			}
			first := ""
			for _, f := range forms[p] {
				name := fmt.Sprintf("__pm_vd%d", serial)
				serial++
				if first == "" {
					first = name
				}
				added = append(added, "typename "+name+", ")
				checks = append(checks, "__is_same("+name+", "+tr.src[t[f.from].start:t[f.to].end]+")")
				group = append(group, replacement{start: t[f.from].start, end: t[f.to].end, text: name})
			}
			d := decl[p]
			group = append(group, replacement{start: t[d[1]].end, end: t[d[1]].end, text: " = typename __pm_vec_elem<" + first + ">::type"})
		}
		if len(added) == 0 || tr.overlapsExisting(group) {
			continue
		}
		first := tr.next(lt + 1)
		group = append(group,
			replacement{start: t[first].start, end: t[first].start, text: strings.Join(added, "")},
			replacement{start: t[gt].start, end: t[gt].start, text: ", typename = typename __pm_enable_if<" + strings.Join(checks, " && ") + ">::type"})
		tr.repls = append(tr.repls, group...)
	}
}

// vecAliasTemplates returns the names of the alias templates
// template <typename U> using A = [typename] [metal::]vec<U, N>.
func (tr *translator) vecAliasTemplates() map[string]bool {
	t := tr.toks
	names := map[string]bool{}
	for i := 0; i+10 < len(t); i++ {
		if t[i].attr >= 0 || t[i].text != "template" || t[i+1].text != "<" || (t[i+2].text != "typename" && t[i+2].text != "class") || t[i+4].text != ">" || t[i+5].text != "using" || t[i+7].text != "=" {
			continue
		}
		k := i + 8
		if t[k].text == "typename" {
			k++
		}
		if k+2 < len(t) && t[k].text == "metal" && t[k+1].text == ":" && t[k+2].text == ":" {
			k += 3
		}
		if k+3 < len(t) && t[k].text == "vec" && t[k+1].text == "<" && t[k+2].text == t[i+3].text && t[k+3].text == "," {
			names[t[i+6].text] = true
		}
	}
	return names
}

// functionParams returns the parentheses of the parameter list of the
// function template whose template parameter list ends at gt and whose
// body opens at open; ok is false for a class, a kernel, an operator or a
// member defined outside its class.
func (tr *translator) functionParams(gt, open int) (params, close int, ok bool) {
	t := tr.toks
	params, close = -1, -1
	for k := gt; k < open; k++ {
		if t[k].text == "kernel" {
			return 0, 0, false
		}
	}
	for k := tr.next(gt + 1); k < open; k = tr.next(k + 1) {
		switch t[k].text {
		case "struct", "class", "union", "template", "operator", "using", ":":
			if close < 0 {
				return 0, 0, false
			}
		case "(":
			n := tr.prev(k)
			if params < 0 && t[n].kind == tIdent && t[n].text != "decltype" && t[n].text != "alignas" {
				params = k
			}
			if k = tr.match(k); k < 0 {
				return 0, 0, false
			}
			if close < 0 && params >= 0 {
				close = k
			}
		}
	}
	return params, close, params >= 0 && close >= 0
}

// overlapsExisting reports whether a replacement of group overlaps one
// already made.
func (tr *translator) overlapsExisting(group []replacement) bool {
	for _, g := range group {
		for _, r := range tr.repls {
			if g.start < r.end && r.start < g.end || r.start == r.end && r.start > g.start && r.start < g.end {
				return true
			}
		}
	}
	return false
}
