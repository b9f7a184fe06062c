package msl

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// Built-in values for a 3-D grid with partial edge threadgroups.
const builtinsSrc = mslPrelude + `
kernel void builtins(device uint* out [[buffer(0)]],
                     uint3 tpig [[thread_position_in_grid]],
                     uint3 tpitg [[thread_position_in_threadgroup]],
                     uint3 tgpig [[threadgroup_position_in_grid]],
                     uint3 tptg [[threads_per_threadgroup]],
                     uint3 tgpg [[threadgroups_per_grid]],
                     uint3 grid [[threads_per_grid]],
                     uint tiitg [[thread_index_in_threadgroup]],
                     ushort tiisg [[thread_index_in_simdgroup]],
                     ushort sgitg [[simdgroup_index_in_threadgroup]],
                     uint width [[threads_per_simdgroup]],
                     uint2 tpig2 [[thread_position_in_grid]]) {
    uint index = tpig.x + grid.x * (tpig.y + grid.y * tpig.z);
    device uint* o = out + index * 20;
    o[0] = tpig.x; o[1] = tpig.y; o[2] = tpig.z;
    o[3] = tpitg.x; o[4] = tpitg.y; o[5] = tpitg.z;
    o[6] = tgpig.x; o[7] = tgpig.y; o[8] = tgpig.z;
    o[9] = tptg.x; o[10] = tptg.y; o[11] = tptg.z;
    o[12] = tgpg.x * 10000 + tgpg.y * 100 + tgpg.z;
    o[13] = tiitg; o[14] = tiisg; o[15] = sgitg; o[16] = width;
    o[17] = tpig2.x + tpig2.y * 1000;
    o[18] = grid.x * 10000 + grid.y * 100 + grid.z;
    o[19] = 0xC0FFEE;
}
`

func TestBuiltIns(t *testing.T) {
	lib := compileT(t, builtinsSrc, CompileOptions{})
	f := functionT(t, lib, "builtins")
	grid := [3]int{11, 5, 3}
	tptg := [3]int{4, 3, 2}
	total := grid[0] * grid[1] * grid[2]
	out := newMem(t, 4*20*total)
	for i := range out.u32() {
		out.u32()[i] = 0xFFFFFFFF
	}
	d := &Dispatch{Grid: ThreadsGrid(grid, tptg), Order: Shuffled, Seed: 1}
	d.Buffers[0] = out.binding()
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	tgpg := [3]int{3, 2, 2}
	for z := 0; z < grid[2]; z++ {
		for y := 0; y < grid[1]; y++ {
			for x := 0; x < grid[0]; x++ {
				pos := [3]int{x, y, z}
				var tg, local, act [3]int
				for k := 0; k < 3; k++ {
					tg[k] = pos[k] / tptg[k]
					local[k] = pos[k] % tptg[k]
					act[k] = min(tptg[k], grid[k]-tg[k]*tptg[k])
				}
				tiitg := local[0] + act[0]*(local[1]+act[1]*local[2])
				want := []uint32{
					uint32(x), uint32(y), uint32(z),
					uint32(local[0]), uint32(local[1]), uint32(local[2]),
					uint32(tg[0]), uint32(tg[1]), uint32(tg[2]),
					uint32(act[0]), uint32(act[1]), uint32(act[2]),
					uint32(tgpg[0]*10000 + tgpg[1]*100 + tgpg[2]),
					uint32(tiitg), uint32(tiitg % 32), uint32(tiitg / 32), 32,
					uint32(x + y*1000),
					uint32(grid[0]*10000 + grid[1]*100 + grid[2]),
					0xC0FFEE,
				}
				index := x + grid[0]*(y+grid[1]*z)
				got := out.u32()[index*20 : index*20+20]
				if !equalU32(got, want) {
					t.Fatalf("thread %v: got %v, want %v", pos, got, want)
				}
			}
		}
	}
}

const atomicSrc = mslPrelude + `
kernel void histogram(device const uint* in [[buffer(0)]],
                      device atomic_uint* bins [[buffer(1)]],
                      device atomic_int* total [[buffer(2)]],
                      uint i [[thread_position_in_grid]],
                      uint tid [[thread_index_in_threadgroup]]) {
    threadgroup atomic_uint local_count;
    if (tid == 0) {
        atomic_store_explicit(&local_count, 0, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&bins[in[i] % 8], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&local_count, 1, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        atomic_fetch_add_explicit(total, int(atomic_load_explicit(&local_count, memory_order_relaxed)), memory_order_relaxed);
    }
}
`

func TestAtomics(t *testing.T) {
	lib := compileT(t, atomicSrc, CompileOptions{})
	f := functionT(t, lib, "histogram")
	const n = 4096
	in, bins, total := newMem(t, 4*n), newMem(t, 4*8), newMem(t, 4)
	want := make([]uint32, 8)
	for i := range in.u32() {
		in.u32()[i] = uint32(i*2654435761) >> 7
		want[in.u32()[i]%8]++
	}
	d := &Dispatch{Grid: ThreadsGrid([3]int{n, 1, 1}, [3]int{128, 1, 1}), Workers: 2}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = in.binding(), bins.binding(), total.binding()
	c, err := f.Run(d)
	if err != nil {
		t.Fatal(err)
	}
	if !equalU32(bins.u32(), want) || total.i32()[0] != n {
		t.Fatalf("bins %v total %d, want %v and %d", bins.u32(), total.i32()[0], want, n)
	}
	if c.Loaded[1] != 4*n || c.Stored[1] != 4*n || c.Loaded[0] != 4*n {
		t.Fatalf("atomic traffic: loaded %v stored %v", c.Loaded[:3], c.Stored[:3])
	}
}

func TestDispatchValidation(t *testing.T) {
	lib := compileT(t, vecAddSrc, CompileOptions{})
	f := functionT(t, lib, "vec_add")
	a := newF32(t, 16)
	good := func() *Dispatch {
		d := &Dispatch{Grid: ThreadsGrid([3]int{16, 1, 1}, [3]int{16, 1, 1})}
		d.Buffers[0], d.Buffers[1], d.Buffers[2] = a.binding(), a.binding(), a.binding()
		return d
	}
	cases := []struct {
		name   string
		modify func(d *Dispatch)
		want   string
	}{
		{"unbound buffer named first", func(d *Dispatch) { d.Buffers[1] = Binding{} }, ": buffer(1) (parameter b) is not bound; the access: out-of-bounds device memory access: load of 4 bytes at 0x0, "},
		{"zero threadgroup size", func(d *Dispatch) { d.Grid.ThreadsPerThreadgroup[1] = 0 }, "ThreadsPerThreadgroup [16 0 1]: dimension 1 is 0"},
		{"too many threads", func(d *Dispatch) { d.Grid.ThreadsPerThreadgroup = [3]int{64, 32, 1} }, "2048 threads, more than the function's maxTotalThreadsPerThreadgroup 1024"},
		{"both grids", func(d *Dispatch) { d.Grid.Threadgroups = [3]int{1, 1, 1} }, "exactly one of Grid.Threadgroups"},
		{"negative length", func(d *Dispatch) { d.Buffers[2].Len = -4 }, "Buffers[2].Len is -4"},
		{"threadgroup memory", func(d *Dispatch) { d.ThreadgroupMemoryLength[3] = 20 }, "ThreadgroupMemoryLength[3] is 20, must be a non-negative multiple of 16"},
		{"bad order", func(d *Dispatch) { d.Order = 7 }, "Order 7"},
	}
	for _, c := range cases {
		d := good()
		c.modify(d)
		_, err := f.Run(d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := f.Run(good()); err != nil {
		t.Fatalf("valid dispatch: %v", err)
	}
}

func TestDivisionByZeroReported(t *testing.T) {
	lib := compileT(t, `kernel void divide(device const int* num [[buffer(0)]],
                   device const int* den [[buffer(1)]],
                   device int* out [[buffer(2)]],
                   uint i [[thread_position_in_grid]]) {
    out[i] = num[i] / den[i];
}
`, CompileOptions{})
	f := functionT(t, lib, "divide")
	num, den, out := newMem(t, 4*32), newMem(t, 4*32), newMem(t, 4*32)
	for i := range den.i32() {
		num.i32()[i] = int32(i * 3)
		den.i32()[i] = int32(i%5 + 1)
	}
	d := &Dispatch{Grid: ThreadsGrid([3]int{32, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0], d.Buffers[1], d.Buffers[2] = num.binding(), den.binding(), out.binding()
	if _, err := f.Run(d); err != nil {
		t.Fatal(err)
	}
	for i := range out.i32() {
		if out.i32()[i] != int32(i*3)/int32(i%5+1) {
			t.Fatalf("out[%d] = %d", i, out.i32()[i])
		}
	}
	den.i32()[17] = 0
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if ke.Kernel != "divide" || ke.File != DefaultFileName || ke.Line != 5 || ke.Thread != [3]int{17, 0, 0} || ke.Threadgroup != [3]int{} || !strings.Contains(ke.Msg, "division") || ke.OutOfBounds() {
		t.Fatalf("got %v (out of bounds %v), want a division by zero in divide at %s:5 in thread 17", err, ke.OutOfBounds(), DefaultFileName)
	}
}

func TestDeadlockReported(t *testing.T) {
	lib := compileT(t, mslPrelude+`
kernel void stuck(device float* out [[buffer(0)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    float v = float(tid);
    if (tid == 3) {
        threadgroup_barrier(mem_flags::mem_none);
    }
    simdgroup_float8x8 a = make_filled_simdgroup_matrix<float, 8, 8>(v); simdgroup_multiply(a, a, a);
    threadgroup_barrier(mem_flags::mem_none);
    out[tid] = v;
}
`, CompileOptions{})
	out := newF32(t, 32)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := functionT(t, lib, "stuck").Run(d)
	ke := kernelErrorT(t, err)
	if ke.Line != 10 || !strings.Contains(ke.Msg, "deadlock") || !strings.Contains(ke.Msg, "line 8") {
		t.Fatalf("got %v, want a deadlock at line 10 naming the barrier at line 8", err)
	}
}

func TestThreadgroupMemoryLimit(t *testing.T) {
	lib := compileT(t, `kernel void big(device float* out [[buffer(0)]],
                threadgroup float* dyn [[threadgroup(0)]],
                uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float tile[4096];
    tile[tid] = 1.0;
    dyn[tid] = 2.0;
    out[tid] = tile[tid] + dyn[tid];
}
`, CompileOptions{})
	f := functionT(t, lib, "big")
	out := newF32(t, 32)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	d.ThreadgroupMemoryLength[0] = 16384
	poison(out.f32())
	if _, err := f.Run(d); err != nil {
		t.Fatalf("16 KiB + 16 KiB: %v", err)
	}
	if out.f32()[31] != 3 {
		t.Fatalf("out[31] = %v, want 3", out.f32()[31])
	}
	d.ThreadgroupMemoryLength[0] = 16384 + 16
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if !strings.Contains(ke.Msg, "threadgroup memory exceeds 32768 bytes") {
		t.Fatalf("got %v, want the threadgroup memory limit", err)
	}
}

// concurrentSrc sums each threadgroup's inputs through threadgroup
// memory, declared in the kernel and set by the encoder, with barriers.
const concurrentSrc = mslPrelude + `
kernel void tg_sum(device const float* in [[buffer(0)]],
                   device float* sums [[buffer(1)]],
                   threadgroup float* scratch [[threadgroup(0)]],
                   uint gid [[thread_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint group [[threadgroup_position_in_grid]],
                   uint n [[threads_per_threadgroup]]) {
    threadgroup float partial[256];
    scratch[tid] = in[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    partial[tid] = scratch[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = n / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0) {
        sums[group] = partial[0];
    }
}
`

// Dispatches from several goroutines at once, in different orders, each
// checked bit for bit.
func TestConcurrentRuns(t *testing.T) {
	lib := compileT(t, concurrentSrc, CompileOptions{})
	f := functionT(t, lib, "tg_sum")
	const tg, groups = 256, 8
	in := newF32(t, tg*groups)
	fillRandom(in.f32(), 31)
	want := make([]float32, groups)
	for g := range want {
		want[g] = treeSum(in.f32()[g*tg : (g+1)*tg])
	}
	done := make(chan error)
	for w := 0; w < 4; w++ {
		sums := newF32(t, groups)
		go func(order Order) {
			for rep := 0; rep < 5; rep++ {
				poison(sums.f32())
				d := &Dispatch{Grid: ThreadgroupsGrid([3]int{groups, 1, 1}, [3]int{tg, 1, 1}), Order: order, Seed: uint64(rep)}
				d.Buffers[0], d.Buffers[1] = in.binding(), sums.binding()
				d.ThreadgroupMemoryLength[0] = tg * 4
				if _, err := f.Run(d); err != nil {
					done <- err
					return
				}
				for g := 0; g < groups; g++ {
					if math.Float32bits(sums.f32()[g]) != math.Float32bits(want[g]) {
						done <- fmt.Errorf("order %v: group %d sum %v, want %v", order, g, sums.f32()[g], want[g])
						return
					}
				}
			}
			done <- nil
		}(Order(w % 3))
	}
	for w := 0; w < 4; w++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// treeSum adds x in the order of concurrentSrc's tree reduction.
func treeSum(x []float32) float32 {
	p := append([]float32(nil), x...)
	for stride := len(p) / 2; stride > 0; stride /= 2 {
		for i := 0; i < stride; i++ {
			p[i] += p[i+stride]
		}
	}
	return p[0]
}

// Copy loops stay loads and stores (not memcpy calls), so their traffic is
// counted and checked.
func TestCopyLoopsCounted(t *testing.T) {
	lib := compileT(t, `template <int N>
kernel void copy_rows(device const float* in [[buffer(0)]],
                      device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    float s[N];
    for (int c = 0; c < N; ++c) {
        s[c] = in[i * N + c];
    }
    for (int c = 0; c < N; ++c) {
        out[i * N + c] = s[(c + i) % N] * 2.0;
    }
}
template [[host_name("copy_rows_4")]] kernel decltype(copy_rows<4>) copy_rows<4>;
template [[host_name("copy_rows_16")]] kernel decltype(copy_rows<16>) copy_rows<16>;
`, CompileOptions{})
	for _, n := range []int{4, 16} {
		f := functionT(t, lib, fmt.Sprintf("copy_rows_%d", n))
		in, out := newF32(t, 64*n), newF32(t, 64*n)
		fillRandom(in.f32(), int64(n))
		poison(out.f32())
		d := &Dispatch{Grid: ThreadsGrid([3]int{64, 1, 1}, [3]int{64, 1, 1})}
		d.Buffers[0], d.Buffers[1] = in.binding(), out.binding()
		c, err := f.Run(d)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			for c := 0; c < n; c++ {
				if got, want := out.f32()[i*n+c], 2*in.f32()[i*n+(c+i)%n]; got != want {
					t.Fatalf("N=%d: out[%d] = %v, want %v", n, i*n+c, got, want)
				}
			}
		}
		if c.Loaded[0] != uint64(4*64*n) || c.Stored[1] != uint64(4*64*n) {
			t.Fatalf("N=%d: loaded %d stored %d, want %d each", n, c.Loaded[0], c.Stored[1], 4*64*n)
		}
	}
}

func TestKindAndOrderNames(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		Buffer: "buffer", ThreadgroupMemory: "threadgroup", BuiltIn: "built-in", ParamKind(3): "ParamKind(3)", ParamKind(-1): "ParamKind(-1)",
		Forward: "forward", Reverse: "reverse", Shuffled: "shuffled", Order(3): "Order(3)", Order(-2): "Order(-2)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", v, got, want)
		}
	}
}
