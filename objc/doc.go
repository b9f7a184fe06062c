// Package objc calls the Objective-C runtime from Go without cgo.
//
// It loads the runtime with purego: Apple's libobjc (with CoreGraphics,
// Metal and Foundation) on macOS, and the GNU runtime (libobjc.so.4 with
// GNUstep Base for NSString, NSError and NSAutoreleasePool) on Linux, where
// puremetal runs its tests. Both expose the same classes and selectors; the
// only difference is how a message is sent. Apple's runtime sends through
// objc_msgSend, which finds the method and jumps to it; the GNU runtime
// returns the method's implementation (IMP) from objc_msg_lookup and the
// caller calls it with the same arguments. Package objc hides that
// difference behind [Send] and its variants.
//
// Arguments are lowered the way the C calling convention of the platform
// lowers them: integers and pointers in registers, then on the stack; a
// 16-byte struct of two words ([Struct16], NSRange) in two registers; a
// 24-byte struct of three words ([Struct24], MTLSize) on the stack on amd64
// and by reference on arm64. The send function is chosen by the method's
// result: [Send] for an object or nothing, [SendWord] for an integer or
// pointer, [SendBool], [SendFloat64] and [SendStruct24]. A Go pointer
// passed as an argument goes through [Pointer], which keeps its memory off
// the goroutine stack for the send.
//
// A package lists the selectors it sends once, in a [SelectorTable]: a
// struct of SEL fields tagged with each selector's name and its method's
// type encoding. The table registers them on first use and refuses, when
// the program starts, a method that some platform's calling convention
// would need lowered differently than the send functions do.
//
// Objects follow Cocoa's ownership rules: a method whose name begins with
// alloc, new, copy or mutableCopy returns an object the caller owns and must
// [ID.Release]; any other method returns an object the caller does not own,
// which lives until the innermost autorelease pool drains (see
// [WithAutoreleasePool]) unless the caller retains it.
package objc
