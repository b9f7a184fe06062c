package msl

import (
	"math"
	"path/filepath"
	"testing"
	"unsafe"
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

// maxRelErr is the largest |got - want| / max(|want|, 1).
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
		runOrders(t, f, d, func() { copy(out.f32(), make([]float32, n)) }, func(o Order) {
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
		runOrders(t, f, d, func() { copy(out.f32(), make([]float32, rows*axis)) }, func(o Order) {
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
		runOrders(t, f, d, func() { copy(out.f32(), make([]float32, rows*axis)) }, func(o Order) {
			if e := maxRelErr(out.f32(), want); e > 1e-5 {
				t.Fatalf("%v: max relative error %g", o, e)
			}
		})
		t.Logf("block_softmax_float32: max relative error %g", maxRelErr(out.f32(), want))
	})
}
