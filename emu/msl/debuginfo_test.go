package msl

import (
	"debug/dwarf"
	"debug/elf"
	"testing"
)

// A library carries line tables (kernel faults name their line) and no
// variables' locations, which would double its compile time.
func TestLibrariesCarryLineTablesOnly(t *testing.T) {
	lib := compileT(t, mslPrelude+`kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float x = float(i) * 2;
    out[i] = x;
}
`, CompileOptions{})
	f, err := elf.Open(lib.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	units := 0
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			units++
		case dwarf.TagVariable, dwarf.TagFormalParameter:
			t.Fatalf("the library's debug information describes a variable (%v at offset %#x)", e.Tag, e.Offset)
		}
	}
	if units == 0 {
		t.Fatal("the library has no compile unit in its debug information")
	}
}
