package mtl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// A nil encode function is an argument the queue refuses, not a panic.
func TestQueueNilEncode(t *testing.T) {
	g := newGPU(t)
	pending, submitErr := g.Q.Submit(nil)
	_, timedErr := g.Q.RunTimed(nil)
	for what, err := range map[string]error{
		"Run":              g.Q.Run(nil),
		"RunTimed":         timedErr,
		"RunCommandBuffer": g.Q.RunCommandBuffer(nil),
		"Submit":           submitErr,
	} {
		if !errors.Is(err, mtl.ErrInvalidArgument) || !strings.Contains(err.Error(), what+": nil encode function") {
			t.Errorf("%s(nil): %v, want an error wrapping mtl.ErrInvalidArgument naming the nil encode function", what, err)
		}
	}
	if pending != nil {
		t.Errorf("Submit(nil) returned a Pending")
	}
}

// Elements says why Slice would return nil: a released or nil buffer, a
// private one, one shorter than an element.
func TestElements(t *testing.T) {
	g := newGPU(t)
	b := g.Buffer(12, mtl.ResourceStorageModeShared)
	if s, err := mtl.Elements[float32](b); err != nil || len(s) != 3 {
		t.Errorf("Elements[float32] of 12 bytes: %d elements, %v; want 3", len(s), err)
	}
	if s, err := mtl.Elements[[4]float32](b); !errors.Is(err, mtl.ErrInvalidArgument) || s != nil || !strings.Contains(err.Error(), "16 bytes, the buffer 12") {
		t.Errorf("Elements of a 16-byte element in 12 bytes: %v, %v", s, err)
	}
	private := g.Buffer(16, mtl.ResourceStorageModePrivate)
	if _, err := mtl.Elements[float32](private); !errors.Is(err, mtl.ErrInvalidArgument) || !strings.Contains(err.Error(), "private storage") {
		t.Errorf("Elements of a private buffer: %v", err)
	}
	if _, err := mtl.Elements[float32](nil); !errors.Is(err, mtl.ErrInvalidArgument) {
		t.Errorf("Elements of nil: %v", err)
	}
	if s := mtl.Slice[float32](nil); s != nil {
		t.Errorf("Slice of nil: %v", s)
	}
	gone, err := g.D.NewBuffer(16, mtl.ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	gone.Release()
	if s, err := mtl.Elements[float32](gone); !errors.Is(err, mtl.ErrReleased) || s != nil || !strings.Contains(err.Error(), "Elements: the buffer was released") {
		t.Errorf("Elements of a released buffer: %v, %v", s, err)
	}
	if s := mtl.Slice[float32](gone); s != nil {
		t.Errorf("Slice of a released buffer: %v", s)
	}
}

// A name the library lacks matches mtl.ErrNoFunction, and the message
// lists the names it has.
func TestNewFunctionMissing(t *testing.T) {
	g := newGPU(t)
	lib, err := g.D.NewLibraryWithSource(kernelsSource, mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	f, err := lib.NewFunction("saxpi")
	if f != nil || !errors.Is(err, mtl.ErrNoFunction) || !strings.Contains(err.Error(), `"saxpi"`) || !strings.Contains(err.Error(), "fill") {
		t.Errorf(`NewFunction("saxpi"): %v, %v; want an error wrapping mtl.ErrNoFunction naming it and the library's functions`, f, err)
	}
}

// SetValue refuses a float64 on every device (MSL has no double): the
// untyped constant 2.0 is one, where the kernel's constant float& would
// read 0 from its low bytes.
func TestSetValueDouble(t *testing.T) {
	g := newGPU(t)
	type params struct {
		N     uint32
		Scale float64
	}
	for what, set := range map[string]func(e *mtl.ComputeCommandEncoder){
		"float64": func(e *mtl.ComputeCommandEncoder) { mtl.SetValue(e, 2.0, 1) },
		"field":   func(e *mtl.ComputeCommandEncoder) { mtl.SetValue(e, params{1, 2}, 1) },
	} {
		err := g.Q.Run(func(e *mtl.ComputeCommandEncoder) error {
			set(e)
			return nil
		})
		if !errors.Is(err, mtl.ErrInvalidArgument) || !strings.Contains(err.Error(), "no double") {
			t.Errorf("SetValue of a %s: %v, want a refusal saying MSL has no double", what, err)
		}
	}
}
