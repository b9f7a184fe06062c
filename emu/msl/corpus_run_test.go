package msl

import (
	"math"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/puremetal/puremetal/internal/floats"
)

// mlxLibrary compiles one of MLX's kernel files as its build does.
func mlxLibrary(t *testing.T, root, name string) *Library {
	t.Helper()
	lib, err := CompileFile(filepath.Join(root, "mlx", "backend", "metal", "kernels", name), mlxOptions(root))
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	return lib
}

// pipelineFunction returns the named function as a pipeline of its host
// would get it: without function constants, none of which it may require.
func pipelineFunction(t *testing.T, lib *Library, name string) *Function {
	t.Helper()
	f := functionT(t, lib, name)
	for _, c := range f.Constants {
		if c.Required {
			t.Fatalf("%s requires function constant %s (index %d), which its host does not give", name, c.Name, c.Index)
		}
	}
	return f
}

// runOrders runs d in the forward and the reverse scheduling order,
// calling reset before and check after each run, so that a result that
// depends on the schedule, or a race report, fails the test.
func runOrders(t *testing.T, f *Function, d *Dispatch, reset func(), check func(order Order)) {
	t.Helper()
	for _, o := range []Order{Forward, Reverse} {
		reset()
		d.Order = o
		if _, err := f.Run(d); err != nil {
			t.Fatalf("%s (%v order): %v", f.Name, o, err)
		}
		check(o)
	}
}

func scalarMem[T any](t *testing.T, v T) *mem {
	m := newMem(t, int(unsafe.Sizeof(v)))
	*(*T)(unsafe.Pointer(&m.b[0])) = v
	return m
}

// maxRelErr is the largest |got - want| / max(|want|, 1); it is infinite
// where an element is NaN, as one the kernel did not write is (outputs are
// poisoned with NaN before each run).
func maxRelErr(got []float32, want []float64) float64 {
	worst := 0.0
	for i, g := range got {
		e := math.Abs(float64(g)-want[i]) / math.Max(math.Abs(want[i]), 1)
		if math.IsNaN(e) {
			return math.Inf(1)
		}
		worst = math.Max(worst, e)
	}
	return worst
}

// TestCorpusMLXRun runs a sample of MLX's kernels as MLX's host code
// dispatches them and compares them with Go computations.
func TestCorpusMLXRun(t *testing.T) {
	root := corpusDir(t, mlxDirEnv, "mlx/backend/metal/kernels/utils.h")

	t.Run("arange", func(t *testing.T) {
		f := pipelineFunction(t, mlxLibrary(t, root, "arange.metal"), "arangefloat32")
		const n = 1000
		start, step, out := scalarMem(t, float32(0.5)), scalarMem(t, float32(0.25)), newF32(t, n)
		d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{256, 1, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = start.binding(), step.binding(), out.binding()
		runOrders(t, f, d, func() { floats.Poison(out.f32()) }, func(o Order) {
			for i, g := range out.f32() {
				if w := float32(0.5) + float32(i)*float32(0.25); g != w {
					t.Fatalf("%v: out[%d] = %v, want %v", o, i, g, w)
				}
			}
		})
		t.Logf("arangefloat32: %d elements matched exactly", n)
	})

	// rms_norm and softmax: one threadgroup per row of 32 * ceil(ceil(axis
	// / 4) / 32) threads, as normalization.cpp and softmax.cpp dispatch.
	const rows, axis = 3, 300
	tgSize := 32 * ((axis + 3) / 4 / 32)
	if (axis+3)/4%32 != 0 {
		tgSize += 32
	}
	x := newF32(t, rows*axis)
	fillRandom(x.f32(), 7)

	t.Run("rms_norm", func(t *testing.T) {
		f := pipelineFunction(t, mlxLibrary(t, root, "rms_norm.metal"), "rmsfloat32")
		w, out := newF32(t, axis), newF32(t, rows*axis)
		fillRandom(w.f32(), 8)
		const eps = 1e-5
		d := &Dispatch{Grid: ThreadsGrid([3]int{rows * tgSize, 1, 1}, [3]int{tgSize, 1, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = x.binding(), w.binding(), out.binding()
		d.Buffers[3], d.Buffers[4], d.Buffers[5] = scalarMem(t, float32(eps)).binding(), scalarMem(t, uint32(axis)).binding(), scalarMem(t, uint32(1)).binding()
		want := make([]float64, rows*axis)
		for r := 0; r < rows; r++ {
			ss := 0.0
			for i := 0; i < axis; i++ {
				v := float64(x.f32()[r*axis+i])
				ss += v * v
			}
			inv := 1 / math.Sqrt(ss/axis+eps)
			for i := 0; i < axis; i++ {
				want[r*axis+i] = float64(w.f32()[i]) * float64(x.f32()[r*axis+i]) * inv
			}
		}
		runOrders(t, f, d, func() { floats.Poison(out.f32()) }, func(o Order) {
			if e := maxRelErr(out.f32(), want); e > 1e-5 {
				t.Fatalf("%v: max relative error %g", o, e)
			}
		})
		t.Logf("rmsfloat32: max relative error %g", maxRelErr(out.f32(), want))
	})

	t.Run("softmax", func(t *testing.T) {
		f := pipelineFunction(t, mlxLibrary(t, root, "softmax.metal"), "block_softmax_float32")
		out := newF32(t, rows*axis)
		d := &Dispatch{Grid: ThreadsGrid([3]int{rows * tgSize, 1, 1}, [3]int{tgSize, 1, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = x.binding(), out.binding(), scalarMem(t, int32(axis)).binding()
		want := make([]float64, rows*axis)
		for r := 0; r < rows; r++ {
			m := math.Inf(-1)
			for i := 0; i < axis; i++ {
				m = math.Max(m, float64(x.f32()[r*axis+i]))
			}
			s := 0.0
			for i := 0; i < axis; i++ {
				s += math.Exp(float64(x.f32()[r*axis+i]) - m)
			}
			for i := 0; i < axis; i++ {
				want[r*axis+i] = math.Exp(float64(x.f32()[r*axis+i])-m) / s
			}
		}
		runOrders(t, f, d, func() { floats.Poison(out.f32()) }, func(o Order) {
			if e := maxRelErr(out.f32(), want); e > 1e-5 {
				t.Fatalf("%v: max relative error %g", o, e)
			}
		})
		t.Logf("block_softmax_float32: max relative error %g", maxRelErr(out.f32(), want))
	})

	mlxSamples(t, root)
}

// ggmlGetRowsArgs mirrors ggml_metal_kargs_get_rows (ggml-metal-impl.h).
type ggmlGetRowsArgs struct {
	ne00t, ne00      int32
	nb01, nb02, nb03 uint64
	ne10             int32
	nb10, nb11, nb12 uint64
	nb1, nb2, nb3    uint64
}

// TestCorpusGGMLRun runs a sample of ggml's kernels as
// ggml-metal-ops.cpp dispatches them, from a lazy library (only the
// kernels used are built), and compares them with Go computations.
func TestCorpusGGMLRun(t *testing.T) {
	root := corpusDir(t, ggmlDirEnv, "src/ggml-metal/ggml-metal.metal")
	opts := ggmlOptions()
	opts.Lazy = true
	start := time.Now()
	lib, err := Compile(ggmlSource(t, root), opts)
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	t.Logf("lazy library: %d entry points in %.1fs", len(lib.FunctionNames()), time.Since(start).Seconds())

	t.Run("get_rows_f32", func(t *testing.T) {
		start := time.Now()
		f := pipelineFunction(t, lib, "kernel_get_rows_f32")
		t.Logf("kernel_get_rows_f32 built in %.1fs", time.Since(start).Seconds())
		const ne00, rows = 100, 5
		idx := []int32{4, 0, 2}
		src0, src1, dst := newF32(t, rows*ne00), newMem(t, 4*len(idx)), newF32(t, len(idx)*ne00)
		fillRandom(src0.f32(), 3)
		copy(src1.i32(), idx)
		args := ggmlGetRowsArgs{ne00t: ne00, ne00: ne00, nb01: 4 * ne00, nb02: 4 * ne00 * rows, nb03: 4 * ne00 * rows,
			ne10: int32(len(idx)), nb10: 4, nb11: uint64(4 * len(idx)), nb12: uint64(4 * len(idx)),
			nb1: 4 * ne00, nb2: uint64(4 * ne00 * len(idx)), nb3: uint64(4 * ne00 * len(idx))}
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{len(idx), 1, 1}, [3]int{ne00, 1, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2], d.Buffers[3] = scalarMem(t, args).binding(), src0.binding(), src1.binding(), dst.binding()
		runOrders(t, f, d, func() { floats.Poison(dst.f32()) }, func(o Order) {
			for r, i := range idx {
				for c := 0; c < ne00; c++ {
					if g, w := dst.f32()[r*ne00+c], src0.f32()[int(i)*ne00+c]; g != w {
						t.Fatalf("%v: dst[%d][%d] = %v, want row %d's %v", o, r, c, g, i, w)
					}
				}
			}
		})
	})

	ggmlSamples(t, lib)
}

// TestCorpusMLXLazyUnary builds MLX's unary library (877 kernels) lazily
// and runs its exp, sigmoid and abs kernels (v_ variants, one element per
// thread, as unary.cpp dispatches small contiguous arrays).
func TestCorpusMLXLazyUnary(t *testing.T) {
	root := corpusDir(t, mlxDirEnv, "mlx/backend/metal/kernels/utils.h")
	opts := mlxOptions(root)
	opts.Lazy = true
	start := time.Now()
	lib, err := CompileFile(filepath.Join(root, "mlx", "backend", "metal", "kernels", "unary.metal"), opts)
	if err != nil {
		logCompileError(t, err)
		t.FailNow()
	}
	t.Logf("lazy unary.metal: %d entry points in %.1fs", len(lib.FunctionNames()), time.Since(start).Seconds())
	const n = 1000
	in, out := newF32(t, n), newF32(t, n)
	fillRandom(in.f32(), 11)
	for _, c := range []struct {
		name string
		f    func(float64) float64
	}{
		{"v_Expfloat32float32", math.Exp},
		{"v_Sigmoidfloat32float32", func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
		{"v_Absfloat32float32", math.Abs},
	} {
		start := time.Now()
		f := pipelineFunction(t, lib, c.name)
		built := time.Since(start)
		d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{256, 1, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = in.binding(), out.binding(), scalarMem(t, uint32(n)).binding()
		want := make([]float64, n)
		for i, x := range in.f32() {
			want[i] = c.f(float64(x))
		}
		runOrders(t, f, d, func() { floats.Poison(out.f32()) }, func(o Order) {
			if e := maxRelErr(out.f32(), want); e > 1e-6 {
				t.Fatalf("%s, %v: max relative error %g", c.name, o, e)
			}
		})
		t.Logf("%s: built in %.1fs, max relative error %g", c.name, built.Seconds(), maxRelErr(out.f32(), want))
	}
}
