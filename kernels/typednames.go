package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// typedNames are the entry points of one kernel template instantiated for
// every combination of n element types of [ElemTypes]:
// base_{t1}[_{t2}[_{t3}]]. They are made once, so that looking one up on
// every dispatch allocates nothing.
type typedNames struct {
	base  string
	n     int
	names [len(ElemTypes)][len(ElemTypes)][len(ElemTypes)]string // unused types F32 (0)
}

// newTypedNames returns the names of base instantiated for n = 1, 2 or 3
// element types.
func newTypedNames(base string, n int) *typedNames {
	v := &typedNames{base: base, n: n}
	for _, k := range v.keys() {
		v.names[k[0]][k[1]][k[2]] = v.build(k)
	}
	return v
}

// keys returns every combination of the n types, the unused ones F32.
func (v *typedNames) keys() [][3]spec.ElemType {
	keys := [][3]spec.ElemType{{}}
	for i := range v.n {
		var next [][3]spec.ElemType
		for _, k := range keys {
			for _, t := range ElemTypes {
				k[i] = t
				next = append(next, k)
			}
		}
		keys = next
	}
	return keys
}

func (v *typedNames) build(k [3]spec.ElemType) string {
	name := v.base
	for _, t := range k[:v.n] {
		name += "_" + t.String()
	}
	return name
}

// name returns the entry point for types ts (the first n are used; the
// others must be F32); types without a kernel get the name such a kernel
// would have, which no source defines.
func (v *typedNames) name(ts ...spec.ElemType) string {
	var k [3]spec.ElemType
	copy(k[:v.n], ts)
	for _, t := range k {
		if int(t) >= len(ElemTypes) {
			return v.build(k)
		}
	}
	return v.names[k[0]][k[1]][k[2]]
}

// all returns every entry point.
func (v *typedNames) all() []string {
	var names []string
	for _, k := range v.keys() {
		names = append(names, v.names[k[0]][k[1]][k[2]])
	}
	return names
}

// entriesOf returns the entry points of the kernels vs.
func entriesOf(vs ...*typedNames) func() []string {
	return func() []string {
		var names []string
		for _, v := range vs {
			names = append(names, v.all()...)
		}
		return names
	}
}
