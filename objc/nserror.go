package objc

import "fmt"

// Error is an NSError copied into Go: its domain, code and localized
// description.
type Error struct {
	Domain      string
	Code        int
	Description string
}

// Error returns the description followed by the domain and the code.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s %d)", e.Description, e.Domain, e.Code)
}

// ErrorFromNSError copies the NSError err into an *Error, or returns nil
// when err is nil. It does not release err.
func ErrorFromNSError(err ID) error {
	if err == 0 {
		return nil
	}
	loadSels()
	return &Error{
		Domain:      GoString(Send(err, sels.domain)),
		Code:        int(SendWord(err, sels.code)),
		Description: GoString(Send(err, sels.localizedDescription)),
	}
}
