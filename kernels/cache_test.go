package kernels

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// logged collects what a registry logs.
type logged struct {
	mu    sync.Mutex
	lines []string
}

func (l *logged) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logged) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// firstPipeline makes a registry with its cache in dir, with the
// emulated device's compiled libraries removed from its compile cache (as
// in a fresh process on a fresh machine; the cache is in xdg, the test's
// XDG_CACHE_HOME), and times its first pipeline: what it takes to get
// ready to dispatch. It returns the libraries built with clang meanwhile.
func firstPipeline(t *testing.T, xdg, dir, entry string, log *logged) (reg *Registry, builds int, took time.Duration) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(xdg, "puremetal", "msl", "lib")); err != nil {
		t.Fatal(err)
	}
	dev := testdevice.Emulated(t, emu.Options{})
	reg = NewRegistryWithCache(dir, log.logf)
	before := emu.LibraryBuilds()
	start := time.Now()
	p, err := reg.Pipeline(dev, entry)
	took = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if p.ThreadExecutionWidth() != 32 {
		t.Fatalf("pipeline of %s: execution width %d", entry, p.ThreadExecutionWidth())
	}
	return reg, emu.LibraryBuilds() - before, took
}

// The pipeline cache: a cold start compiles and writes the archive; a warm
// start, with no compiled library in the emulated device's own compile
// cache, builds nothing and makes the pipeline from the archive; a corrupt
// archive is ignored with a logged reason and replaced.
func TestRegistryPipelineCache(t *testing.T) {
	dir, xdg := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg) // the emulated device's compile cache
	entry := Decode(4)
	var log logged
	// Build the emulated device's runtime in the new cache first, so that
	// the cold start times the kernels' compile alone.
	testdevice.Pipeline(t, testdevice.Emulated(t, emu.Options{}), testdevice.BindingKernels, mtl.CompileOptions{}, "fill").Release()

	cold, builds, coldTime := firstPipeline(t, xdg, dir, entry, &log)
	if builds == 0 {
		t.Fatalf("a cold start built no library")
	}
	if h, m := cold.CacheStats(); h != 0 || m != 1 {
		t.Errorf("cold start: %d hits, %d misses; want 0 and 1", h, m)
	}
	path := cold.CachePath(testdevice.Emulated(t, emu.Options{}))
	cold.Release()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("no archive written at %s: %v", path, err)
	}

	warm, builds, warmTime := firstPipeline(t, xdg, dir, entry, &log)
	if builds != 0 {
		t.Errorf("a warm start built %d libraries; the archive should have spared them", builds)
	}
	if h, m := warm.CacheStats(); h != 1 || m != 0 {
		t.Errorf("warm start: %d hits, %d misses; want 1 and 0", h, m)
	}
	warm.Release()
	t.Logf("emulated device, time to first pipeline of %s (ready to dispatch): cold %v, warm %v", entry, coldTime.Round(time.Millisecond), warmTime.Round(time.Millisecond))
	if log.String() != "" {
		t.Errorf("the registry logged:\n%s", log.String())
	}

	if err := os.WriteFile(path, []byte("puremetal emulated binary archive 1\n{\"Target\": cut short"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken, builds, _ := firstPipeline(t, xdg, dir, entry, &log)
	if builds == 0 {
		t.Error("with a corrupt archive nothing was compiled")
	}
	if !strings.Contains(log.String(), "ignoring the pipeline cache "+path) {
		t.Errorf("a corrupt archive was not logged; the log:\n%s", log.String())
	}
	t.Logf("corrupt archive: %s", log.String())
	broken.Release()
	again, builds, _ := firstPipeline(t, xdg, dir, entry, &log)
	if h, _ := again.CacheStats(); builds != 0 || h != 1 {
		t.Errorf("after replacing the corrupt archive: %d builds, %d hits", builds, h)
	}
	again.Release()
}

// A different source, language version or device names a different
// archive file, so a stale one is never opened.
func TestRegistryCacheKey(t *testing.T) {
	dev := testdevice.Emulated(t, emu.Options{})
	dir := t.TempDir()
	a := NewRegistryWithCache(dir, nil)
	b := NewRegistryWithCache(dir, nil)
	countingSources(b, DecodeFile) // b's decode source differs
	c := NewRegistryWithCache(dir, nil)
	c.language = mtl.LanguageVersion3_0
	pa, pb, pc := a.CachePath(dev), b.CachePath(dev), c.CachePath(dev)
	if pa == pb || pa == pc || filepath.Dir(pa) != dir {
		t.Errorf("cache files %s, %s, %s", pa, pb, pc)
	}
	if NewRegistry().CachePath(dev) != "" {
		t.Error("a registry without a cache has a cache file")
	}
	t.Setenv(CacheDirEnv, "/somewhere/else")
	if DefaultCacheDir() != "/somewhere/else" {
		t.Errorf("DefaultCacheDir %q ignores %s", DefaultCacheDir(), CacheDirEnv)
	}
}

// TestMetalRegistryPipelineCache runs the pipeline cache on the system's
// GPU (a Mac; it skips elsewhere): the second registry makes the pipeline
// from the archive the first wrote (a hit under
// PipelineOptionFailOnBinaryArchiveMiss), and the times to the first
// pipeline are logged.
func TestMetalRegistryPipelineCache(t *testing.T) {
	dev := testdevice.Metal(t)
	dir := t.TempDir()
	var log logged
	var took [2]time.Duration
	for i := range took {
		reg := NewRegistryWithCache(dir, log.logf)
		start := time.Now()
		if _, err := reg.Pipeline(dev, Decode(4)); err != nil {
			t.Fatal(err)
		}
		took[i] = time.Since(start)
		hits, misses := reg.CacheStats()
		if want := [2]int{i, 1 - i}; [2]int{hits, misses} != want {
			t.Errorf("registry %d: %d hits, %d misses; want %v", i, hits, misses, want)
		}
		reg.Release()
	}
	if log.String() != "" {
		t.Errorf("the registry logged:\n%s", log.String())
	}
	t.Logf("%s: time to the first pipeline of %s: cold %v, warm %v", dev.Name(), Decode(4), took[0], took[1])
}
