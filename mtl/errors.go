package mtl

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/puremetal/puremetal/objc"
)

// ErrInvalidArgument is wrapped by every error that reports an argument
// the package refuses before sending it to Metal: an encoder's refusals
// (which [ComputeCommandEncoder.EndEncoding] returns), a buffer length out
// of range, a nil or released object passed as an argument, an object of
// another device. The message names the argument and the numbers; match
// it with errors.Is.
var ErrInvalidArgument = errors.New("mtl: invalid argument")

// ErrReleased is wrapped by the error of a method called on an object
// after its Release, or given an object released before: the message names
// the object and the method. Such an error also wraps
// [ErrInvalidArgument] when the released object is an argument.
var ErrReleased = errors.New("mtl: object was released")

// ErrNoFunction is wrapped by the error of [Library.NewFunction] for a
// name the library has no function of; the message lists those it has.
var ErrNoFunction = errors.New("mtl: no such function")

// argError is an argument the package refused, or a method called on a
// released object.
type argError struct {
	msg               string
	invalid, released bool
}

func (e *argError) Error() string { return e.msg }

// Is makes the error match ErrInvalidArgument for a refused argument, and
// ErrReleased for a released object.
func (e *argError) Is(target error) bool {
	return (e.invalid && target == ErrInvalidArgument) || (e.released && target == ErrReleased)
}

// invalidf returns an error wrapping ErrInvalidArgument, its message
// "mtl: " and the formatted text.
func invalidf(format string, args ...any) error {
	return &argError{msg: "mtl: " + fmt.Sprintf(format, args...), invalid: true}
}

// releasedArg returns an error wrapping ErrInvalidArgument and ErrReleased.
func releasedArg(format string, args ...any) error {
	return &argError{msg: "mtl: " + fmt.Sprintf(format, args...), invalid: true, released: true}
}

// released returns the error of method called on a released object,
// wrapping ErrReleased: "mtl: Device.NewBuffer: the device was released".
func released(method, object string) error {
	return &argError{msg: fmt.Sprintf("mtl: %s: the %s was released", method, object), released: true}
}

// CommandBufferErrorCode is MTLCommandBufferError: the code of an NSError
// in [CommandBufferErrorDomain], why a command buffer failed.
type CommandBufferErrorCode int

// Command buffer error codes (MTLCommandBufferError).
const (
	CommandBufferErrorNone            CommandBufferErrorCode = 0
	CommandBufferErrorInternal        CommandBufferErrorCode = 1
	CommandBufferErrorTimeout         CommandBufferErrorCode = 2
	CommandBufferErrorPageFault       CommandBufferErrorCode = 3
	CommandBufferErrorAccessRevoked   CommandBufferErrorCode = 4 // formerly Blacklisted
	CommandBufferErrorNotPermitted    CommandBufferErrorCode = 7
	CommandBufferErrorOutOfMemory     CommandBufferErrorCode = 8
	CommandBufferErrorInvalidResource CommandBufferErrorCode = 9
	CommandBufferErrorMemoryless      CommandBufferErrorCode = 10
	CommandBufferErrorDeviceRemoved   CommandBufferErrorCode = 11
	CommandBufferErrorStackOverflow   CommandBufferErrorCode = 12
)

// CommandBufferErrorDomain is the NSError domain of a command buffer's
// failure (MTLCommandBufferErrorDomain).
const CommandBufferErrorDomain = "MTLCommandBufferErrorDomain"

var commandBufferErrorNames = map[CommandBufferErrorCode]string{
	CommandBufferErrorNone:            "MTLCommandBufferErrorNone",
	CommandBufferErrorInternal:        "MTLCommandBufferErrorInternal",
	CommandBufferErrorTimeout:         "MTLCommandBufferErrorTimeout",
	CommandBufferErrorPageFault:       "MTLCommandBufferErrorPageFault",
	CommandBufferErrorAccessRevoked:   "MTLCommandBufferErrorAccessRevoked",
	CommandBufferErrorNotPermitted:    "MTLCommandBufferErrorNotPermitted",
	CommandBufferErrorOutOfMemory:     "MTLCommandBufferErrorOutOfMemory",
	CommandBufferErrorInvalidResource: "MTLCommandBufferErrorInvalidResource",
	CommandBufferErrorMemoryless:      "MTLCommandBufferErrorMemoryless",
	CommandBufferErrorDeviceRemoved:   "MTLCommandBufferErrorDeviceRemoved",
	CommandBufferErrorStackOverflow:   "MTLCommandBufferErrorStackOverflow",
}

// String returns the code's Metal name, such as
// "MTLCommandBufferErrorPageFault", or "MTLCommandBufferError(N)" for a
// code this package does not know.
func (c CommandBufferErrorCode) String() string {
	if s, ok := commandBufferErrorNames[c]; ok {
		return s
	}
	return "MTLCommandBufferError(" + strconv.Itoa(int(c)) + ")"
}

// CommandBufferError is the error a command buffer failed with: the
// NSError that [CommandBuffer.Error] reads, and that [CommandQueue.Run],
// RunTimed and RunCommandBuffer return. Get the domain and the code with
// errors.As:
//
//	var cbErr *mtl.CommandBufferError
//	if errors.As(err, &cbErr) && cbErr.Code == mtl.CommandBufferErrorPageFault { ... }
//
// Code is meaningful when Domain is [CommandBufferErrorDomain] (Metal's
// own failures; the emulated device reports in that domain too). The error
// also unwraps to the *objc.Error it was read from.
type CommandBufferError struct {
	Domain      string
	Code        CommandBufferErrorCode
	Description string
	nserror     *objc.Error
}

// Error returns "mtl: command buffer failed: " and the description,
// followed by the code's name in Metal's domain
// ("(MTLCommandBufferErrorPageFault)"), or by the domain and the code
// otherwise.
func (e *CommandBufferError) Error() string {
	if e.Domain == CommandBufferErrorDomain {
		return fmt.Sprintf("mtl: command buffer failed: %s (%v)", e.Description, e.Code)
	}
	return fmt.Sprintf("mtl: command buffer failed: %s (%s %d)", e.Description, e.Domain, int(e.Code))
}

// Unwrap returns the *objc.Error the error was read from.
func (e *CommandBufferError) Unwrap() error {
	if e.nserror == nil {
		return nil
	}
	return e.nserror
}

// commandBufferError converts a command buffer's NSError (nil: no error).
func commandBufferError(nserr objc.ID) error {
	err := objc.ErrorFromNSError(nserr)
	if err == nil {
		return nil
	}
	oe := err.(*objc.Error)
	return &CommandBufferError{Domain: oe.Domain, Code: CommandBufferErrorCode(oe.Code), Description: oe.Description, nserror: oe}
}
