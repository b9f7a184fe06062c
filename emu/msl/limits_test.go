package msl

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Sizes whose products overflow 64 bits (or 32) are refused, naming the
// exact product, instead of wrapping to a small count and "completing"
// without running.
func TestGridProductsDoNotOverflow(t *testing.T) {
	lib := compileT(t, vecAddSrc, CompileOptions{})
	f := functionT(t, lib, "vec_add")
	a := newF32(t, 16)
	cases := []struct {
		grid Grid
		want string
	}{
		{ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1 << 22, 1 << 21, 1 << 21}), "has 18446744073709551616 threads, more than the function's maxTotalThreadsPerThreadgroup 1024"},
		{ThreadsGrid([3]int{16, 1, 1}, [3]int{1 << 32, 1 << 32, 1}), "has 18446744073709551616 threads"},
		{ThreadgroupsGrid([3]int{1 << 22, 1 << 21, 1 << 21}, [3]int{1, 1, 1}), "18446744073709551616 threadgroups, more than 2^32-1"},
		{ThreadgroupsGrid([3]int{1 << 40, 1, 1}, [3]int{16, 1, 1}), "grid dimension 0 has 1099511627776 threadgroups of 16 threads"},
		{ThreadgroupsGrid([3]int{1 << 62, 1, 1}, [3]int{4, 1, 1}), "grid dimension 0 has 4611686018427387904 threadgroups of 4 threads, more than 2^32-1 threads"},
		{ThreadsGrid([3]int{1 << 33, 1, 1}, [3]int{16, 1, 1}), "dimension 0 has 8589934592 threads, more than 2^32-1"},
	}
	for _, c := range cases {
		d := &Dispatch{Grid: c.grid}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = a.binding(), a.binding(), a.binding()
		_, err := f.Run(d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("grid %+v: error %v, want one containing %q", c.grid, err, c.want)
		}
	}
}

// Threadgroup memory lengths whose sum overflows, and bindings whose end
// does, are refused too.
func TestThreadgroupMemoryLengthsDoNotOverflow(t *testing.T) {
	lib := compileT(t, vecAddSrc, CompileOptions{})
	f := functionT(t, lib, "vec_add")
	a := newF32(t, 16)
	d := &Dispatch{Grid: ThreadsGrid([3]int{16, 1, 1}, [3]int{16, 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = a.binding(), a.binding(), a.binding()
	for i := 0; i < 4; i++ {
		d.ThreadgroupMemoryLength[i] = 1 << 62
	}
	_, err := f.Run(d)
	if err == nil || !strings.Contains(err.Error(), "ThreadgroupMemoryLength[0] is 4611686018427387904 bytes, more than 32768") {
		t.Fatalf("four lengths of 2^62 bytes (adding up to 0 in 64 bits): %v", err)
	}
	d.ThreadgroupMemoryLength = [MaxBindings]int{}
	d.Buffers[1].Len = 1 << 62
	d.Buffers[1].Ptr = 3 << 62
	if _, err := f.Run(d); err == nil || !strings.Contains(err.Error(), "Dispatch.Buffers[1] at 0xc000000000000000 with length 4611686018427387904 wraps around the address space") {
		t.Fatalf("a binding past the end of the address space: %v", err)
	}
}

func TestEnvironmentKnobs(t *testing.T) {
	for v, want := range map[string]time.Duration{"": DefaultTimeout, "5m": 5 * time.Minute, "0": -1, "250ms": 250 * time.Millisecond} {
		if got, err := parseTimeout(v); got != want || err != nil {
			t.Errorf("PUREMETAL_EMU_TIMEOUT=%q: %v, %v; want %v", v, got, err, want)
		}
	}
	// a bad value is an error naming the variable, never the default
	for _, v := range []string{"2", "-1s", "abc", "-3s", "soon", "1.5"} {
		if got, err := parseTimeout(v); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PUREMETAL_EMU_TIMEOUT=%q", v)) {
			t.Errorf("PUREMETAL_EMU_TIMEOUT=%q: %v, %v; want an error naming the variable and the value", v, got, err)
		}
	}
	// and so is a dispatch that would take it
	old := envTimeout
	t.Cleanup(func() { envTimeout = old })
	envTimeout = func() (time.Duration, error) { return parseTimeout("2") }
	f := functionT(t, compileT(t, "kernel void k(device float* x [[buffer(0)]]) { x[0] = 1; }", CompileOptions{}), "k")
	x := newF32(t, 1)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1, 1, 1})}
	d.Buffers[0] = x.binding()
	if _, err := f.Run(d); err == nil || !strings.Contains(err.Error(), `PUREMETAL_EMU_TIMEOUT="2" is not a time limit`) || x.f32()[0] != 0 {
		t.Errorf("dispatch with PUREMETAL_EMU_TIMEOUT=2: %v, x[0] = %v; want an error naming the variable and nothing run", err, x.f32()[0])
	}
	d.Timeout = time.Second // a dispatch with a limit of its own does not read it
	if _, err := f.Run(d); err != nil || x.f32()[0] != 1 {
		t.Errorf("dispatch with its own time limit: %v, x[0] = %v", err, x.f32()[0])
	}
	for v, want := range map[string]int{"": 0, "0": 0, "64": 64, "3": 3} {
		if got, err := parseWorkers(v); got != want || err != nil {
			t.Errorf("PUREMETAL_EMU_WORKERS=%q: %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"-2", "many", "65", "2.5"} {
		if _, err := parseWorkers(v); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PUREMETAL_EMU_WORKERS=%q is not a number of workers", v)) {
			t.Errorf("PUREMETAL_EMU_WORKERS=%q: %v; want an error naming the variable and the value", v, err)
		}
	}
	oldWorkers := envWorkers
	t.Cleanup(func() { envWorkers = oldWorkers })
	envWorkers = func() (int, error) { return parseWorkers("many") }
	x.f32()[0] = 0
	d.Timeout = time.Second
	if _, err := f.Run(d); err == nil || !strings.Contains(err.Error(), `PUREMETAL_EMU_WORKERS="many"`) || x.f32()[0] != 0 {
		t.Errorf("dispatch with PUREMETAL_EMU_WORKERS=many: %v, x[0] = %v; want an error naming the variable and nothing run", err, x.f32()[0])
	}
	d.Workers = 1 // a dispatch with its own number does not read it
	if _, err := f.Run(d); err != nil || x.f32()[0] != 1 {
		t.Errorf("dispatch with its own workers: %v, x[0] = %v", err, x.f32()[0])
	}
}
