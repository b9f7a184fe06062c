package objc

import "unsafe"

// cstring returns s as a NUL-terminated byte slice.
func cstring(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// cptr converts an address returned by C into a pointer. The memory it
// points to is not managed by Go.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// gostring copies the NUL-terminated C string at p.
func gostring(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := cptr(p)
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// gobytes copies n bytes at the C address p.
func gobytes(p uintptr, n int) []byte {
	if p == 0 || n == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice((*byte)(cptr(p)), n)...)
}
