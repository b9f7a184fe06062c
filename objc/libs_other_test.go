//go:build !linux

package objc

// disableFoundation does nothing: only the GNU runtime's run can leave
// Foundation out.
func disableFoundation() {}
