package kernels

import (
	"fmt"
	"strings"
	"sync"

	"github.com/puremetal/puremetal/mtl"
)

// Registry compiles the kernel sources and caches their compute pipeline
// states, per device. Each source is compiled at most once per device, the
// first time one of its kernels is asked for; each pipeline state is built
// once and then shared. A Registry is safe for concurrent use. The zero
// value is an empty registry ready to use, as is the one [NewRegistry]
// returns.
type Registry struct {
	mu        sync.Mutex
	libraries map[key]*library // made on first use
	pipelines map[key]*pipeline
	released  bool
	source    func(file string) string // nil means Source; tests substitute a broken one
	language  mtl.LanguageVersion      // 0 means LanguageVersion(dev)
	cache     *pipelineCache           // nil without a persistent cache (cache.go)
}

// key names a source file or an entry point on one device.
type key struct {
	dev  *mtl.Device
	name string
}

type library struct {
	once sync.Once
	lib  *mtl.Library
	err  error
}

type pipeline struct {
	once sync.Once
	pso  *mtl.ComputePipelineState
	err  error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return new(Registry) }

// NewRegistryWithLanguage returns an empty registry that compiles the
// kernels as Metal Shading Language version v instead of
// [LanguageVersion]'s choice: 3.0 reads and writes bf16 data as 16-bit
// integers, 3.1 and later as MSL's bfloat. The device's system must
// compile v.
func NewRegistryWithLanguage(v mtl.LanguageVersion) *Registry {
	return &Registry{language: v}
}

// compileOptions are the options every source is compiled with: the
// registry's language version, and fast math off, so that the kernels
// compute exp and their sums exactly as written, the decode family stays
// bit-identical across variants and close to the CPU references.
func (r *Registry) compileOptions(dev *mtl.Device) mtl.CompileOptions {
	v := r.language
	if v == 0 {
		v = LanguageVersion(dev)
	}
	return mtl.CompileOptions{LanguageVersion: v, FastMath: false}
}

// Pipeline returns the compute pipeline state of the named entry point on
// dev, compiling its source first if this registry has not done so on dev.
// Errors name the entry point, and a compile error names the source file;
// a released device is an error wrapping mtl.ErrReleased.
// A failed compilation is remembered and returned again. The pipeline state
// belongs to the registry: do not release it.
func (r *Registry) Pipeline(dev *mtl.Device, entry string) (*mtl.ComputePipelineState, error) {
	if r == nil {
		return nil, fmt.Errorf("kernels: pipeline %s: nil registry", entry)
	}
	if dev == nil {
		return nil, fmt.Errorf("kernels: pipeline %s: nil device", entry)
	}
	if dev.Released() {
		return nil, fmt.Errorf("kernels: pipeline %s: the device was released (%w)", entry, mtl.ErrReleased)
	}
	file, ok := entryFile[entry]
	if !ok {
		return nil, fmt.Errorf("kernels: unknown entry point %q (known: %s)", entry, strings.Join(EntryPoints(), ", "))
	}
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return nil, fmt.Errorf("kernels: pipeline %s: the registry was released", entry)
	}
	if r.libraries == nil {
		r.libraries = make(map[key]*library)
		r.pipelines = make(map[key]*pipeline)
	}
	src := r.source
	if src == nil {
		src = Source
	}
	lk, pk := key{dev, file}, key{dev, entry}
	l := r.libraries[lk]
	if l == nil {
		l = new(library)
		r.libraries[lk] = l
	}
	p := r.pipelines[pk]
	if p == nil {
		p = new(pipeline)
		r.pipelines[pk] = p
	}
	r.mu.Unlock()

	r.openCache(dev) // before the compile, which the archive may spare
	l.once.Do(func() { l.lib, l.err = compile(dev, file, src(file), r.compileOptions(dev)) })
	p.once.Do(func() {
		if l.err != nil {
			p.err = l.err
			return
		}
		p.pso, p.err = r.pipelineOf(dev, l.lib, entry)
	})
	return p.pso, p.err
}

func compile(dev *mtl.Device, file, src string, opts mtl.CompileOptions) (*mtl.Library, error) {
	lib, err := dev.NewLibraryWithSource(src, opts)
	if err != nil {
		return nil, fmt.Errorf("kernels: compiling %s: %w", file, err)
	}
	return lib, nil
}

func newPipeline(dev *mtl.Device, lib *mtl.Library, entry string) (*mtl.ComputePipelineState, error) {
	fn, err := lib.NewFunction(entry)
	if err != nil {
		return nil, fmt.Errorf("kernels: function %s: %w", entry, err)
	}
	defer fn.Release()
	pso, err := dev.NewComputePipelineState(fn)
	if err != nil {
		return nil, fmt.Errorf("kernels: pipeline state for %s: %w", entry, err)
	}
	return pso, nil
}

// Release saves the registry's pipeline cache, if it has one (see
// [NewRegistryWithCache]), and releases every library and pipeline state
// the registry holds, on every device. Pipeline states it returned must no longer be used, and
// Release must not run while another goroutine is in Pipeline. Afterwards
// [Registry.Pipeline] returns an error; a second Release, or one on a nil
// Registry, does nothing.
func (r *Registry) Release() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseCache()
	for _, p := range r.pipelines {
		if p.pso != nil {
			p.pso.Release()
		}
	}
	for _, l := range r.libraries {
		if l.lib != nil {
			l.lib.Release()
		}
	}
	r.libraries, r.pipelines = nil, nil
	r.released = true
}
