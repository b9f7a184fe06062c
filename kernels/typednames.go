package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// typedNames are the entry points of one kernel template instantiated for
// every combination of n element types of [ElemTypes]:
// base_{t1}[_{t2}[_{t3}]]. They are made once, so that looking one up on
// every dispatch allocates nothing.
type typedNames struct {
	base  string
	n     int
	names map[[3]spec.ElemType]string
}

// newTypedNames returns the names of base instantiated for n = 1, 2 or 3
// element types.
func newTypedNames(base string, n int) *typedNames {
	v := &typedNames{base: base, n: n, names: map[[3]spec.ElemType]string{}}
	var each func(k [3]spec.ElemType, i int)
	each = func(k [3]spec.ElemType, i int) {
		if i == n {
			v.names[k] = v.build(k)
			return
		}
		for _, t := range ElemTypes {
			k[i] = t
			each(k, i+1)
		}
	}
	each([3]spec.ElemType{}, 0)
	return v
}

func (v *typedNames) build(k [3]spec.ElemType) string {
	name := v.base
	for _, t := range k[:v.n] {
		name += "_" + t.String()
	}
	return name
}

// name returns the entry point for types ts (the first n are used); types
// without a kernel get the name such a kernel would have, which no source
// defines.
func (v *typedNames) name(ts ...spec.ElemType) string {
	var k [3]spec.ElemType
	copy(k[:v.n], ts)
	if s, ok := v.names[k]; ok {
		return s
	}
	return v.build(k)
}

// all returns every entry point, in no particular order.
func (v *typedNames) all() []string {
	names := make([]string, 0, len(v.names))
	for _, s := range v.names {
		names = append(names, s)
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
