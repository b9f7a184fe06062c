package testdevice

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/puremetal/puremetal/mtl"
)

// ArchiveSuite checks binary archives on whichever device g has: a
// pipeline added to an archive, serialized and loaded again is found there
// (a pipeline made with PipelineOptionFailOnBinaryArchiveMiss succeeds and
// runs), one that was not added is a miss, and a file that is not an
// archive is refused with an error rather than a crash.
func ArchiveSuite(t *testing.T, g *GPU) {
	d := g.D
	lib, err := d.NewLibraryWithSource(BindingKernels, mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Release()
	fn := func(name string) *mtl.Function {
		f, err := lib.NewFunction(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Release)
		return f
	}
	fill, add := fn("fill"), fn("add_into")
	path := filepath.Join(t.TempDir(), "pipelines.metallib")

	empty, err := d.NewBinaryArchive("")
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.AddComputePipelineFunctions(mtl.ComputePipelineDescriptor{Function: fill}); err != nil {
		t.Fatal(err)
	}
	if err := empty.Serialize(path); err != nil {
		t.Fatal(err)
	}
	empty.Release()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("the serialized archive: %v, %v", st, err)
	}

	loaded, err := d.NewBinaryArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Release()
	p, err := d.NewComputePipelineStateWithDescriptor(mtl.ComputePipelineDescriptor{Function: fill, BinaryArchives: []*mtl.BinaryArchive{loaded}}, mtl.PipelineOptionFailOnBinaryArchiveMiss)
	if err != nil {
		t.Fatalf("the pipeline of a function in the loaded archive: %v", err)
	}
	defer p.Release()
	const n = 100
	x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
	if err := g.Q.Run(EncodeFill(p, x, n)); err != nil {
		t.Fatal(err)
	}
	for i, v := range mtl.Slice[float32](x)[:n] {
		if v != 1+float32(i) {
			t.Fatalf("x[%d] = %v through the archived pipeline", i, v)
		}
	}
	if p, err := d.NewComputePipelineStateWithDescriptor(mtl.ComputePipelineDescriptor{Function: add, BinaryArchives: []*mtl.BinaryArchive{loaded}}, mtl.PipelineOptionFailOnBinaryArchiveMiss); err == nil {
		p.Release()
		t.Error("a function never added to the archive was found in it")
	}
	// Without the option, a miss compiles.
	p2, err := d.NewComputePipelineStateWithDescriptor(mtl.ComputePipelineDescriptor{Function: add, BinaryArchives: []*mtl.BinaryArchive{loaded}}, mtl.PipelineOptionNone)
	if err != nil {
		t.Fatal(err)
	}
	p2.Release()
	if _, err := d.NewComputePipelineStateWithDescriptor(mtl.ComputePipelineDescriptor{}, mtl.PipelineOptionNone); err == nil {
		t.Error("a descriptor without a function was accepted")
	}

	corrupt := filepath.Join(t.TempDir(), "corrupt.metallib")
	if err := os.WriteFile(corrupt, []byte("this is not a binary archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := d.NewBinaryArchive(corrupt); err == nil {
		a.Release()
		t.Error("a file of text loaded as a binary archive")
	} else {
		t.Logf("corrupt archive: %v", err)
	}
}
