package msl

import (
	"regexp"
	"sort"
	"strings"
)

// bfloat and matrices in threadgroup memory are in the generic address
// space here (__pm_threadgroup, <metal_matrix>). A function template
// parameter threadgroup T* whose T no other parameter names is left as
// written, since __pm_threadgroup<T> would keep T from being deduced; a
// call passing a threadgroup bfloat array would then find no function
// (MLX's quantized gather_qmm_rhs: gemm_loop_aligned(threadgroup T* As,
// threadgroup T* Bs, ...) called with threadgroup T Xs[...], T bfloat).
// Such a function template is repeated after itself with those parameters
// in the generic address space: a call with threadgroup pointers chooses
// the original, the more specialized template, and one with bfloat (or
// matrix) arrays, which only the copy takes, the copy.

// neverMatches is a pattern matching no text.
var neverMatches = regexp.MustCompile(`\A\z.`)

// threadgroupDeducedCopies writes the generic copies of the function
// templates with a threadgroup T* (or T&) parameter deducing T alone.
func (tr *translator) threadgroupDeducedCopies() {
	t := tr.toks
	for i := 0; i < len(t); i++ {
		lt, gt := tr.templateParams(i)
		if gt < 0 {
			continue
		}
		open, end := tr.templateBody(gt)
		if open < 0 {
			continue
		}
		// a function: its parameter list is the last parentheses before
		// the body, after its name; no struct, class or kernel
		params, close := -1, -1
		function := true
		for k := tr.next(gt + 1); k < open && function; k = tr.next(k + 1) {
			switch t[k].text {
			case "struct", "class", "union", "kernel", "template", "operator", "using":
				function = false
			case "(":
				n := tr.prev(k)
				if params < 0 && t[n].kind == tIdent && t[n].text != "decltype" && t[n].text != "alignas" {
					params = k
				}
				if k = tr.match(k); k < 0 {
					function = false
					k = open
				}
				if close < 0 && params >= 0 {
					close = k
				}
			}
		}
		if !function || params < 0 || close < 0 {
			continue
		}
		for k := gt; k < open; k++ {
			if t[k].attr < 0 && t[k].text == "kernel" {
				function = false
			}
		}
		typeParams := map[string]bool{}
		for k := tr.next(lt + 1); k < gt; k = tr.next(k + 1) {
			if (t[k].text == "typename" || t[k].text == "class") && tr.next(k+1) < gt && t[tr.next(k+1)].kind == tIdent {
				typeParams[t[tr.next(k+1)].text] = true
			}
		}
		var drop []replacement
		generic := map[string]bool{}
		for k := params + 1; k < close && function; k++ {
			if t[k].attr >= 0 || t[k].text != "threadgroup" {
				continue
			}
			if name, ok := tr.deducedOnlyInThreadgroup(k, params, close, typeParams); ok {
				drop = append(drop, replacement{start: t[k].start, end: t[k].end})
				generic[name] = true
			}
		}
		if len(drop) == 0 || !function {
			continue
		}
		// the copy takes only the types that are generic in threadgroup
		// memory (not T = threadgroup float, deduced from a threadgroup
		// float*, for which the call would be ambiguous)
		var conds []string
		for name := range generic {
			conds = append(conds, "__pm_tg_generic<"+name+">::v")
		}
		sort.Strings(conds)
		at := t[gt].start
		if t[gt].text == ">>" {
			at++
		}
		drop = append(drop, replacement{start: at, end: at, text: ", typename = typename __pm_enable_if<" + strings.Join(conds, " && ") + ">::type"})
		start := t[i].start
		if strings.Contains(tr.src[start:t[end].end], "#") {
			continue
		}
		copied, ok := tr.applyRange(start, t[end].end, drop, neverMatches, "")
		if !ok {
			continue
		}
		tr.repls = append(tr.repls, replacement{start: t[end].end, end: t[end].end, text: " " + strings.ReplaceAll(copied, "\n", " ")})
		i = end
	}
}

// deducedOnlyInThreadgroup reports whether threadgroup token k, in the
// parameter list between the parentheses open and close, begins a
// parameter threadgroup T* or T& (const allowed) of a type template
// parameter T that every other parameter naming it names in threadgroup
// memory too, and returns T.
func (tr *translator) deducedOnlyInThreadgroup(k, open, close int, typeParams map[string]bool) (string, bool) {
	t := tr.toks
	p := tr.prev(k)
	if p >= 0 && t[p].text == "const" {
		p = tr.prev(p)
	}
	if p != open && t[p].text != "," {
		return "", false
	}
	name := tr.next(k + 1)
	if name < close && t[name].text == "const" {
		name = tr.next(name + 1)
	}
	if name >= close || t[name].kind != tIdent || !typeParams[t[name].text] {
		return "", false
	}
	if n := tr.next(name + 1); n >= close || t[n].text != "*" && t[n].text != "&" {
		return "", false
	}
	for j := open + 1; j < close; j++ {
		if t[j].attr < 0 && t[j].text == t[name].text && !tr.threadgroupNamed(j) {
			return "", false
		}
	}
	return t[name].text, true
}
