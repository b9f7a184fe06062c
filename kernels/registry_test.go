package kernels

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// countingSources makes r count how often it asks for a source's text, that
// is, how often it compiles.
func countingSources(r *Registry, broken string) *atomic.Int32 {
	var n atomic.Int32
	r.source = func(file string) string {
		n.Add(1)
		if file == broken {
			return Source(file) + "\nthis is not Metal;\n"
		}
		return Source(file)
	}
	return &n
}

func TestRegistryCompilesEachSourceOnceConcurrently(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	live := emu.LiveObjects()
	reg := NewRegistry()
	compiles := countingSources(reg, "")

	const workers = 6
	got := make([]map[string]*mtl.ComputePipelineState, workers)
	var wg sync.WaitGroup
	for w := range workers {
		got[w] = map[string]*mtl.ComputePipelineState{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			names := EntryPoints()
			for i := range names { // each worker in its own order
				name := names[(i+w*5)%len(names)]
				p, err := reg.Pipeline(dev, name)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				got[w][name] = p
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := compiles.Load(); n != int32(len(SourceFiles())) {
		t.Errorf("%d compilations for %d sources", n, len(SourceFiles()))
	}
	for _, name := range EntryPoints() {
		p := got[0][name]
		if p == nil {
			t.Fatalf("%s: nil pipeline", name)
		}
		for w := 1; w < workers; w++ {
			if got[w][name] != p {
				t.Errorf("%s: workers 0 and %d got different pipeline states", name, w)
			}
		}
		if max := p.MaxTotalThreadsPerThreadgroup(); max < 128 {
			t.Errorf("%s: maxTotalThreadsPerThreadgroup %d", name, max)
		}
	}
	again, err := reg.Pipeline(dev, Prefill)
	if err != nil || again != got[0][Prefill] {
		t.Errorf("second lookup: %p, %v; want the cached %p", again, err, got[0][Prefill])
	}

	// Another device gets pipelines of its own.
	dev2 := testdevice.Emulated(t, emu.Options{})
	other, err := reg.Pipeline(dev2, Prefill)
	if err != nil || other == got[0][Prefill] {
		t.Errorf("second device: %p, %v; want a pipeline of its own", other, err)
	}

	reg.Release()
	if _, err := reg.Pipeline(dev, Prefill); err == nil {
		t.Errorf("Pipeline after Release succeeded")
	}
	dev2.Release()
	if n := emu.LiveObjects(); n != live {
		t.Errorf("%d live emulated objects after Release, %d before the registry", n, live)
	}
}

func TestRegistryCompileErrorNamesTheSource(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	reg := NewRegistry()
	defer reg.Release()
	compiles := countingSources(reg, DecodeFile)
	for range 2 {
		_, err := reg.Pipeline(dev, DecodeSeq(2))
		if err == nil {
			t.Fatal("a broken source compiled")
		}
		var ce *mtl.CompileError
		if !errors.As(err, &ce) {
			t.Errorf("%v is not a *mtl.CompileError", err)
		}
		if !strings.Contains(err.Error(), "compiling "+DecodeFile) {
			t.Errorf("%q does not name %s", err, DecodeFile)
		}
		// The #line directives make the log point into the file itself.
		body, _ := files.ReadFile(DecodeFile)
		at := fmt.Sprintf("%s:%d:", DecodeFile, strings.Count(string(body), "\n")+2)
		if ce != nil && !strings.Contains(ce.Log, at) {
			t.Errorf("the compiler log does not point at %s:\n%s", at, ce.Log)
		}
	}
	if _, err := reg.Pipeline(dev, Decode(1)); err == nil {
		t.Errorf("another kernel of the broken source compiled")
	}
	if n := compiles.Load(); n != 1 {
		t.Errorf("the broken source was compiled %d times, want once", n)
	}
	// The other sources are unaffected.
	if _, err := reg.Pipeline(dev, Prefill); err != nil {
		t.Errorf("prefill: %v", err)
	}
}

func TestRegistryRejectsBadArguments(t *testing.T) {
	reg := NewRegistry()
	defer reg.Release()
	if _, err := reg.Pipeline(nil, Prefill); err == nil || !strings.Contains(err.Error(), "nil device") {
		t.Errorf("nil device: %v", err)
	}
	dev := testdevice.Emulated(t, emu.Options{})
	_, err := reg.Pipeline(dev, "gated_delta_net_decode_f32_3")
	if err == nil || !strings.Contains(err.Error(), "gated_delta_net_decode_f32_3") || !strings.Contains(err.Error(), Prefill) {
		t.Errorf("unknown entry point: %v", err)
	}
	gone := testdevice.Emulated(t, emu.Options{})
	gone.Release()
	if _, err := reg.Pipeline(gone, Prefill); !errors.Is(err, mtl.ErrReleased) || !strings.Contains(err.Error(), "the device was released") {
		t.Errorf("released device: %v", err)
	}
	var none *Registry
	if _, err := none.Pipeline(dev, Prefill); err == nil || !strings.Contains(err.Error(), "nil registry") {
		t.Errorf("nil registry: %v", err)
	}
	none.Release()
}

// The zero Registry is an empty one: it compiles, caches and releases.
func TestZeroRegistry(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	live := emu.LiveObjects()
	var reg Registry
	p, err := reg.Pipeline(dev, Decode(2))
	if err != nil || p == nil {
		t.Fatalf("zero Registry: %p, %v", p, err)
	}
	if again, err := reg.Pipeline(dev, Decode(2)); again != p || err != nil {
		t.Errorf("second lookup: %p, %v; want the cached %p", again, err, p)
	}
	reg.Release()
	reg.Release()
	if n := emu.LiveObjects(); n != live {
		t.Errorf("%d live emulated objects after Release, %d before the registry", n, live)
	}
	if _, err := reg.Pipeline(dev, Decode(2)); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("Pipeline after Release: %v", err)
	}
}

// A decode step looks up hundreds of pipeline states; once made, a lookup
// allocates nothing, with or without a persistent cache.
func TestRegistryPipelineLookupAllocatesNothing(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	entry := SwiGLUOf(spec.F32)
	for name, reg := range map[string]*Registry{
		"plain":      NewRegistry(),
		"with cache": NewRegistryWithCache(t.TempDir(), t.Logf),
	} {
		if _, err := reg.Pipeline(dev, entry); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = reg.Pipeline(dev, entry) }); n != 0 {
			t.Errorf("%s: Pipeline(%s) made %v allocations per lookup, want 0", name, entry, n)
		}
		reg.Release()
	}
}
