package objc

import "testing"

// BenchmarkSend is a plain send with two word arguments to a Go method:
// the IMP cache lookup (GNU runtime) or objc_msgSend (Apple) and one call.
func BenchmarkSend(b *testing.B) {
	impl := benchClass(b)
	obj, dispose := newInstance(b, impl.cls)
	defer dispose()
	sel := RegisterName(boolMethod.sel)
	for b.Loop() {
		SendWord(obj, sel, 0x101)
	}
}

// BenchmarkSendArgsStruct24 is a send with a word, two MTLSize-shaped
// structs, an NSRange and a word, as a dispatch call passes them.
func BenchmarkSendArgsStruct24(b *testing.B) {
	impl := benchClass(b)
	obj, dispose := newInstance(b, impl.cls)
	defer dispose()
	sel := RegisterName(abiCases[2].sel)
	for b.Loop() {
		SendArgs(obj, sel, Word(1), Struct24(64, 8, 1), Struct16(0, 9), Struct24(32, 1, 1), Word(2))
	}
}

// benchClass is the class of C methods, so that the figures measure the
// send, not a Go callback's reflection.
func benchClass(b *testing.B) abiImpl {
	return cABIClass(b)
}
