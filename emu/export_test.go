package emu

// EmulatedMethod is one method of an emulated class: the name the class
// is registered under, the selector and its Objective-C type encoding.
type EmulatedMethod struct{ Class, Sel, Types string }

// EmulatedMethods lists the instance and class methods of every class in
// classDefs, without -dealloc, which every class answers.
func EmulatedMethods() []EmulatedMethod {
	var out []EmulatedMethod
	for _, c := range classDefs() {
		for _, m := range append(c.methods, c.classMethods...) {
			out = append(out, EmulatedMethod{c.name, m.Sel, m.Types})
		}
	}
	return out
}
