//go:build !amd64 && !arm64

package objc

func lower(*[maxWords]uintptr, *scratch, uintptr, ID, SEL, []Arg) int {
	panic("objc: message sends are implemented for amd64 and arm64 only")
}
