package msl

import "sort"

// laneReads are the SIMD-group and quad-group functions that read another
// lane's operand.
var laneReads = map[string]bool{
	"simd_shuffle": true, "simd_shuffle_up": true, "simd_shuffle_down": true, "simd_shuffle_xor": true,
	"simd_shuffle_rotate_up": true, "simd_shuffle_rotate_down": true, "simd_broadcast": true,
	"quad_shuffle": true, "quad_shuffle_up": true, "quad_shuffle_down": true, "quad_shuffle_xor": true,
	"quad_shuffle_rotate_up": true, "quad_shuffle_rotate_down": true, "quad_broadcast": true,
}

// shuffledType reports whether a variable of the type named name is one
// whose shuffles read an inactive lane's value: MSL's scalar and vector
// types (a program's own types may have shuffles of their own, MLX's
// complex64_t).
func shuffledType(name string) bool {
	return name != "void" && builtinTypeName(name) || name == "bfloat" || name == "bfloat2" || name == "bfloat3" || name == "bfloat4"
}

// shuffleVariables writes the operand of a lane read (simd_shuffle_up(x,
// d), simd_broadcast(x, l), ...) in a kernel's body as __pm_var(x) when it
// is a variable the kernel declares (a parameter or a local of a scalar or
// vector type, not a reference, not in threadgroup memory): on Apple GPUs a lane reading a
// lane that is not active at the call (it diverged, or returned) gets that
// lane's current value of x, which its register still holds, and
// __pm_var(x) lets the runtime read it from the same place in that lane's
// frame (metal_stdlib, __pm_lane_read). A Hillis-Steele scan, if (lane >=
// d) x += simd_shuffle_up(x, d), needs it.
func (tr *translator) shuffleVariables() {
	t := tr.toks
	seen := map[*entryPoint]bool{}
	marked := map[int]bool{} // the declarations followed by __pm_lane_declared
	for _, e := range tr.kernels {
		if seen[e] {
			continue
		}
		seen[e] = true
		from := sort.Search(len(t), func(i int) bool { return t[i].start >= e.body[0] })
		for i := from; i+3 < len(t) && t[i].start < e.body[1]; i++ {
			if t[i].kind != tIdent || !laneReads[t[i].text] || t[i+1].text != "(" || tr.isMember(i) {
				continue
			}
			x := i + 2
			if t[x].kind != tIdent || t[x+1].text != "," || tr.replaced(t[x].start, t[x].end) {
				continue
			}
			d := tr.declaresLocal(e.tok, x)
			if d < 0 {
				continue
			}
			if d < from {
				// a parameter: every lane has it
				tr.repls = append(tr.repls, replacement{start: t[x].start, end: t[x].end, text: "__pm_var<0>(" + t[x].text + ")"})
				continue
			}
			// a local: a lane has it once past its declaration, which
			// then records it (not in a for or if statement's parentheses)
			semi := tr.conditionalEnd(d, false)
			if ob := tr.openingBracket(d); semi < 0 || t[semi].text != ";" || ob >= 0 && t[ob].text == "(" {
				continue
			}
			if !marked[d] {
				marked[d] = true
				tr.repls = append(tr.repls, replacement{start: t[semi].end, end: t[semi].end, text: " __pm_lane_declared(&" + t[d].text + ");"})
			}
			tr.repls = append(tr.repls, replacement{start: t[x].start, end: t[x].end, text: "__pm_var<1>(" + t[x].text + ")"})
		}
	}
}

// declaresLocal returns the token declaring the variable named by
// token x, a value of a scalar or vector type in the thread's own frame
// (neither a reference nor a pointer declarator, nor threadgroup, static
// or constant) between token from (the start of the kernel's declaration)
// and x, or -1 where none does.
func (tr *translator) declaresLocal(from, x int) int {
	t := tr.toks
	for k := from; k < x; k++ {
		if t[k].text != t[x].text || t[k].attr >= 0 {
			continue
		}
		p := tr.prev(k)
		if p < 0 || !shuffledType(t[p].text) || tr.isMember(k) {
			continue
		}
		n := tr.next(k + 1)
		if n >= len(t) || !(t[n].text == "=" || t[n].text == ";" || t[n].text == "," || t[n].text == ")" || t[n].text == "{" || t[n].text == "(") {
			continue
		}
		ok := true
		for j := p; j >= from; j-- {
			s := t[j].text
			if s == ";" || s == "{" || s == "}" || s == "(" || s == "," {
				break
			}
			if s == "threadgroup" || s == "static" || s == "constant" || s == "device" || s == "&" || s == "*" || s == "&&" {
				ok = false
				break
			}
		}
		if ok {
			return k
		}
	}
	return -1
}

// replaced reports whether a replacement already covers part of [start,
// end).
func (tr *translator) replaced(start, end int) bool {
	for _, r := range tr.repls {
		if r.start < end && start < r.end || r.start == r.end && r.start > start && r.start < end {
			return true
		}
	}
	return false
}
