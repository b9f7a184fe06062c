package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/puremetal/puremetal/mtl"
	"golang.org/x/sys/unix"
)

// CacheDirEnv names the environment variable that, when set, is
// [DefaultCacheDir].
const CacheDirEnv = "PUREMETAL_PIPELINE_CACHE"

// DefaultCacheDir is the directory of the pipeline cache where the caller
// names none: $PUREMETAL_PIPELINE_CACHE, else puremetal/pipelines in the
// user's cache directory (~/Library/Caches on macOS, $XDG_CACHE_HOME or
// ~/.cache on Linux), else in the temporary directory.
func DefaultCacheDir() string {
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "puremetal", "pipelines")
}

// NewRegistryWithCache returns an empty registry that keeps the pipelines
// it builds in a persistent cache: one Metal binary archive per device and
// kernel set, a file in dir (DefaultCacheDir() where dir is ""). Before a
// device's first compile the registry loads its archive, and makes each
// pipeline from it when it holds the pipeline (skipping the compiler's
// work; Metal still compiles the source to its intermediate form); a
// pipeline it does not hold is compiled, added to the archive, and the
// archive is written back by [Registry.SaveCache] or [Registry.Release].
//
// The file's name is a hash of the kernel sources, the compile options,
// the operating system (its kernel name, release and version, and the
// architecture) and the GPU's name, so a different OS, GPU or source never
// opens a stale archive. An archive file that cannot be loaded (cut short,
// altered, or written by another kind of device) is ignored, with the
// reason given to logf (log.Printf where logf is nil), and replaced when
// the cache is saved; it is never a failure.
func NewRegistryWithCache(dir string, logf func(format string, args ...any)) *Registry {
	if dir == "" {
		dir = DefaultCacheDir()
	}
	if logf == nil {
		logf = log.Printf
	}
	return &Registry{cache: &pipelineCache{dir: dir, logf: logf, archives: map[*mtl.Device]*archive{}}}
}

// pipelineCache is the persistent cache of a registry.
type pipelineCache struct {
	dir  string
	logf func(format string, args ...any)

	mu           sync.Mutex
	archives     map[*mtl.Device]*archive
	hits, misses int
}

// archive is one device's binary archive and its file.
type archive struct {
	once   sync.Once
	path   string
	a      *mtl.BinaryArchive // nil when the cache is off for the device
	mu     sync.Mutex         // AddComputePipelineFunctions and Serialize
	loaded bool               // from the file
	dirty  bool
}

// CacheStats returns how many pipelines the registry made from its cache
// (hits) and how many it compiled and added to it (misses); both are 0
// for a registry without a cache.
func (r *Registry) CacheStats() (hits, misses int) {
	if r == nil || r.cache == nil {
		return 0, 0
	}
	r.cache.mu.Lock()
	defer r.cache.mu.Unlock()
	return r.cache.hits, r.cache.misses
}

// CachePath returns the file of dev's pipeline cache, or "" for a
// registry without a cache.
func (r *Registry) CachePath(dev *mtl.Device) string {
	if r == nil || r.cache == nil || dev == nil {
		return ""
	}
	return filepath.Join(r.cache.dir, r.cacheKey(dev)+".metallib")
}

// cacheKey is the hash that names dev's archive file.
func (r *Registry) cacheKey(dev *mtl.Device) string {
	h := sha256.New()
	fmt.Fprintf(h, "puremetal pipeline cache 1\n%s/%s\n%s\n%s\n", runtime.GOOS, runtime.GOARCH, systemVersion(), dev.Name())
	opts := r.compileOptions(dev)
	fmt.Fprintf(h, "language %d fastmath %v\n", opts.LanguageVersion, opts.FastMath)
	src := r.source
	if src == nil {
		src = Source
	}
	for _, f := range SourceFiles() {
		s := src(f)
		fmt.Fprintf(h, "%s %d\n%s\n", f, len(s), s)
	}
	return "pipelines-" + hex.EncodeToString(h.Sum(nil))[:24]
}

// systemVersion names the running kernel: its name, release, version and
// machine (uname), which change with every macOS update.
func systemVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown system"
	}
	s := func(b []byte) string {
		for i, c := range b {
			if c == 0 {
				return string(b[:i])
			}
		}
		return string(b)
	}
	return fmt.Sprintf("%s %s %s %s", s(u.Sysname[:]), s(u.Release[:]), s(u.Version[:]), s(u.Machine[:]))
}

// openCache loads dev's archive, once, before the registry compiles for
// it; nil means the registry has no cache.
func (r *Registry) openCache(dev *mtl.Device) *archive {
	c := r.cache
	if c == nil {
		return nil
	}
	c.mu.Lock()
	arc := c.archives[dev]
	if arc == nil {
		arc = &archive{path: r.CachePath(dev)}
		c.archives[dev] = arc
	}
	c.mu.Unlock()
	arc.once.Do(func() {
		if _, err := os.Stat(arc.path); err == nil {
			a, err := dev.NewBinaryArchive(arc.path)
			if err == nil {
				arc.a, arc.loaded = a, true
				return
			}
			c.logf("kernels: ignoring the pipeline cache %s: %v", arc.path, err)
		} else if !errors.Is(err, os.ErrNotExist) {
			c.logf("kernels: ignoring the pipeline cache %s: %v", arc.path, err)
		}
		a, err := dev.NewBinaryArchive("")
		if err != nil {
			c.logf("kernels: no pipeline cache on %s: %v", dev.Name(), err)
			return
		}
		arc.a = a
	})
	if arc.a == nil {
		return nil
	}
	return arc
}

// pipelineOf makes the pipeline of entry from lib: from dev's archive when
// it holds it, else compiled and added to the archive.
func (r *Registry) pipelineOf(dev *mtl.Device, lib *mtl.Library, entry string) (*mtl.ComputePipelineState, error) {
	arc := r.openCache(dev)
	if arc == nil {
		return newPipeline(dev, lib, entry)
	}
	fn, err := lib.NewFunction(entry)
	if err != nil {
		return nil, fmt.Errorf("kernels: function %s: %w", entry, err)
	}
	defer fn.Release()
	desc := mtl.ComputePipelineDescriptor{Function: fn, BinaryArchives: []*mtl.BinaryArchive{arc.a}}
	if arc.loaded {
		if pso, err := dev.NewComputePipelineStateWithDescriptor(desc, mtl.PipelineOptionFailOnBinaryArchiveMiss); err == nil {
			r.cache.count(true)
			return pso, nil
		}
	}
	r.cache.count(false)
	arc.mu.Lock()
	err = arc.a.AddComputePipelineFunctions(mtl.ComputePipelineDescriptor{Function: fn})
	if err == nil {
		arc.dirty = true
	}
	arc.mu.Unlock()
	if err != nil {
		r.cache.logf("kernels: not caching the pipeline of %s: %v", entry, err)
		return newPipeline(dev, lib, entry)
	}
	pso, err := dev.NewComputePipelineStateWithDescriptor(desc, mtl.PipelineOptionNone)
	if err != nil {
		return nil, fmt.Errorf("kernels: pipeline state for %s: %w", entry, err)
	}
	return pso, nil
}

func (c *pipelineCache) count(hit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hit {
		c.hits++
	} else {
		c.misses++
	}
}

// SaveCache writes each device's archive that gained pipelines since it
// was loaded to its file (through a temporary file and a rename, so a
// reader never sees half of one), and returns the first error. It does
// nothing for a registry without a cache.
func (r *Registry) SaveCache() error {
	if r == nil || r.cache == nil {
		return nil
	}
	c := r.cache
	c.mu.Lock()
	list := make([]*archive, 0, len(c.archives))
	for _, arc := range c.archives {
		list = append(list, arc)
	}
	c.mu.Unlock()
	var first error
	for _, arc := range list {
		if err := arc.save(); err != nil {
			c.logf("kernels: saving the pipeline cache: %v", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

func (arc *archive) save() error {
	arc.mu.Lock()
	defer arc.mu.Unlock()
	if arc.a == nil || !arc.dirty {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(arc.path), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", arc.path, os.Getpid())
	if err := arc.a.Serialize(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, arc.path); err != nil {
		os.Remove(tmp)
		return err
	}
	arc.dirty = false
	return nil
}

// releaseCache saves the cache and releases its archives.
func (r *Registry) releaseCache() {
	if r.cache == nil {
		return
	}
	r.SaveCache()
	r.cache.mu.Lock()
	defer r.cache.mu.Unlock()
	for _, arc := range r.cache.archives {
		if arc.a != nil {
			arc.a.Release()
		}
	}
	r.cache.archives = map[*mtl.Device]*archive{}
}
