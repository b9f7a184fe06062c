package checkpoint_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/checkpoint"
)

// writeFile writes data to a new file in a test's temporary folder and
// returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	return writeIn(t, t.TempDir(), name, data)
}

// writeIn writes data to the file name in folder dir, failing the test on
// an error, and returns its path.
func writeIn(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMapSafetensors maps a file and checks that its tensors are views of
// the page-aligned mapping at their offsets, with the parsed file's bytes.
func TestMapSafetensors(t *testing.T) {
	good := small(t)
	f, err := checkpoint.MapSafetensors(writeFile(t, "a.safetensors", good))
	if err != nil {
		t.Fatal(err)
	}
	all := f.Bytes()
	if !bytes.Equal(all, good) {
		t.Fatalf("the mapping holds %d bytes unlike the file's %d", len(all), len(good))
	}
	if p := uintptr(unsafe.Pointer(&all[0])); p%uintptr(os.Getpagesize()) != 0 {
		t.Errorf("mapping at %#x is not page aligned", p)
	}
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		view := all[tn.Offset : tn.Offset+int64(len(tn.Data))]
		if &view[0] != &tn.Data[0] {
			t.Errorf("tensor %s: Data is not the mapping's bytes at Offset %d (copied?)", name, tn.Offset)
		}
	}
	pages := f.Pages()
	if page := os.Getpagesize(); len(pages)%page != 0 || len(pages) < len(all) || len(pages)-len(all) >= page || &pages[0] != &all[0] {
		t.Errorf("Pages: %d bytes for a %d-byte file, pages of %d", len(pages), len(all), page)
	}
	if tail := pages[len(all):]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Error("the last page past the file's end does not read as zero")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err == nil {
		t.Error("a second Close returned no error")
	}
}

// TestMapRefusesMalformed checks that a file that lies about its tensors,
// or is cut anywhere, is an error matching ErrMalformed naming the file,
// not a fault on the mapping.
func TestMapRefusesMalformed(t *testing.T) {
	good := small(t)
	files := map[string][]byte{
		"empty":          nil,
		"header lies":    withHeader(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`, nil),
		"overlap":        withHeader(`{"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "y": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}`, make([]byte, 3)),
		"bad dtype":      withHeader(`{"x": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}`, make([]byte, 1)),
		"length too big": append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, good[8:]...),
	}
	for n := 1; n < len(good); n += 7 {
		files[fmt.Sprintf("cut at %d of %d bytes", n, len(good))] = good[:n]
	}
	for name, data := range files {
		path := writeFile(t, "bad.safetensors", data)
		_, err := checkpoint.MapSafetensors(path)
		if !errors.Is(err, checkpoint.ErrMalformed) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error matching ErrMalformed naming %s", name, err, path)
		}
	}
}

// FuzzParseSafetensors feeds the header parser arbitrary bytes: it must
// return an error or tensors that lie inside the data, at their Offset,
// with as many bytes as their dtype and shape need; never panic.
func FuzzParseSafetensors(f *testing.F) {
	a, _ := checkpoint.NewTensor("a", "BF16", []int{2, 2}, []float32{1, 2, 3, 4})
	var buf bytes.Buffer
	if err := checkpoint.WriteSafetensors(&buf, []checkpoint.Tensor{a, a2(a)}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(withHeader(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "__metadata__": {"k": "v"}}`, make([]byte, 8)))
	f.Add(withHeader(`{"a": {"dtype": "U32", "shape": [1, 0], "data_offsets": [0, 0]}}`, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := checkpoint.ParseSafetensors(data)
		if err != nil {
			return
		}
		for _, name := range st.Names() {
			tn, _ := st.Tensor(name)
			if tn.Offset < 8 || tn.Offset+int64(len(tn.Data)) > int64(len(data)) {
				t.Fatalf("tensor %q: bytes [%d, +%d) outside the %d of the file", name, tn.Offset, len(tn.Data), len(data))
			}
			if len(tn.Data) > 0 && &data[tn.Offset] != &tn.Data[0] {
				t.Fatalf("tensor %q: Data is not the file's bytes at Offset %d", name, tn.Offset)
			}
		}
	})
}

// a2 returns a copy of t named "a2".
func a2(t checkpoint.Tensor) checkpoint.Tensor {
	t.Name = "a2"
	return t
}
