package objc

import (
	"testing"
	"unsafe"
)

var stackClass onceClass

// fillLength is the Go method fill:length: of PMTestStack: it grows the
// goroutine's stack far past its first size, which moves the caller's
// frames, and then writes n bytes through p, as an out-parameter is
// written. A write through an address of the old stack is lost.
func fillLength(self ID, sel SEL, p, n uintptr) uintptr {
	growStack(256)
	b := unsafe.Slice((*byte)(cptr(p)), n)
	for i := range b {
		b[i] = byte(0xa5 ^ i)
	}
	return 1
}

//go:noinline
func growStack(depth int) byte {
	var pad [1024]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		return pad[0]
	}
	return growStack(depth-1) ^ pad[(depth*7)%len(pad)]
}

func stackTestClass(t *testing.T) Class {
	t.Helper()
	return stackClass.get(t, "PMTestStack", rootClass(t), func() []Method {
		return []Method{{Sel: "fill:length:", Types: "Q@:^vQ", Fn: fillLength}}
	})
}

// TestPointerSurvivesStackGrowth passes the address of a small local
// array, through Pointer, to a Go method that grows the stack before
// writing through it, with each send function. Without Pointer the array
// stays on the goroutine's stack, the stack moves under the address C
// holds, and the write is lost.
func TestPointerSurvivesStackGrowth(t *testing.T) {
	cls := stackTestClass(t)
	obj, dispose := newInstance(t, cls)
	defer dispose()
	sel := RegisterName("fill:length:")
	for _, c := range []struct {
		name string
		send func(p, n uintptr)
	}{
		{"Send", func(p, n uintptr) { Send(obj, sel, p, n) }},
		{"SendWord", func(p, n uintptr) { SendWord(obj, sel, p, n) }},
		{"SendBool", func(p, n uintptr) { SendBool(obj, sel, p, n) }},
		{"ID.Send", func(p, n uintptr) { obj.Send(sel, p, n) }},
		{"ID.SendWord", func(p, n uintptr) { obj.SendWord(sel, p, n) }},
		{"SendArgs", func(p, n uintptr) { SendArgs(obj, sel, Word(p), Word(n)) }},
		{"SendFloat64", func(p, n uintptr) { SendFloat64(obj, sel, p, n) }},
		// The method search starts at cls itself: its own method runs.
		{"SendSuper", func(p, n uintptr) { SendSuper(obj, cls, sel, p, n) }},
	} {
		done := make(chan [48]byte)
		// A new goroutine starts with a small stack, which the method's
		// growth is sure to outgrow.
		go func() {
			var b [48]byte
			c.send(Pointer(&b), uintptr(len(b)))
			done <- b
		}()
		b := <-done
		for i, v := range b {
			if v != byte(0xa5^i) {
				t.Errorf("%s: byte %d of the array is %#x after the method wrote %#x: the write went to memory the array no longer occupies", c.name, i, v, byte(0xa5^i))
				break
			}
		}
	}
}
