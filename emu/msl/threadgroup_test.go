package msl

import "testing"

const divergentBarrierSrc = mslPrelude + `
kernel void two_barriers(device float* out [[buffer(0)]],
                         uint tid [[thread_index_in_threadgroup]]) {
    if (tid % 2 == 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    } else {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    out[tid] = 1.0;
}
`

func TestThreadsAtDifferentBarriers(t *testing.T) {
	lib := compileT(t, divergentBarrierSrc, CompileOptions{})
	f := functionT(t, lib, "two_barriers")
	out := newF32(t, 64)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := f.Run(d)
	ke := kernelErrorT(t, err)
	if ke.Line != 7 && ke.Line != 9 {
		t.Fatalf("error at line %d, want 7 or 9: %v", ke.Line, err)
	}
	if !contains(ke.Msg, "different barriers") || !contains(ke.Msg, "line 7") || !contains(ke.Msg, "line 9") {
		t.Fatalf("message %q does not name both barriers", ke.Msg)
	}
}

// Every thread's values live in callee-saved registers across barriers and
// SIMD-group functions, where its fiber is switched out for others: the
// switch must keep them (x86-64 rbx, rbp, r12-r15; arm64 x19-x29, d8-d15).
const liveAcrossSwitchesSrc = mslPrelude + `
kernel void live(device float* out [[buffer(0)]],
                 device uint* outi [[buffer(1)]],
                 uint tid [[thread_index_in_threadgroup]]) {
    float f0 = float(tid) * 1.5f, f1 = f0 + 0.25f, f2 = f0 * 3.0f, f3 = f0 - 7.0f,
          f4 = f0 * 0.5f, f5 = f0 + 11.0f, f6 = f0 * 5.0f, f7 = f0 - 0.75f;
    uint i0 = tid * 3u, i1 = tid ^ 0x55u, i2 = tid + 1000u, i3 = tid * tid,
         i4 = tid << 3, i5 = ~tid, i6 = tid * 7u + 1u, i7 = tid | 0x100u, i8 = tid * 11u;
    for (int r = 0; r < 4; r++) {
        threadgroup_barrier(mem_flags::mem_none);
        float s = simd_sum(f0 + float(r));
        f0 += 1.0f; f1 += 2.0f; f2 += 3.0f; f3 += 4.0f; f4 += 5.0f; f5 += 6.0f; f6 += 7.0f; f7 += s * 0.0f + 8.0f;
        i0 += 1u; i1 += 2u; i2 += 3u; i3 += 4u; i4 += 5u; i5 += 6u; i6 += 7u; i7 += 8u; i8 += 9u;
    }
    out[8 * tid + 0] = f0; out[8 * tid + 1] = f1; out[8 * tid + 2] = f2; out[8 * tid + 3] = f3;
    out[8 * tid + 4] = f4; out[8 * tid + 5] = f5; out[8 * tid + 6] = f6; out[8 * tid + 7] = f7;
    outi[9 * tid + 0] = i0; outi[9 * tid + 1] = i1; outi[9 * tid + 2] = i2; outi[9 * tid + 3] = i3;
    outi[9 * tid + 4] = i4; outi[9 * tid + 5] = i5; outi[9 * tid + 6] = i6; outi[9 * tid + 7] = i7;
    outi[9 * tid + 8] = i8;
}
`

func TestValuesLiveAcrossFiberSwitches(t *testing.T) {
	f := functionT(t, compileT(t, liveAcrossSwitchesSrc, CompileOptions{}), "live")
	const n = 64
	out, outi := newF32(t, 8*n), newMem(t, 4*9*n)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{2, 1, 1}, [3]int{n, 1, 1})}
	d.Buffers[0], d.Buffers[1] = out.binding(), outi.binding()
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		poison(out.f32())
		poison(outi.f32())
		d.Order = order
		if _, err := f.Run(d); err != nil {
			t.Fatal(err)
		}
		for tid := uint32(0); tid < n; tid++ {
			f0 := float32(tid) * 1.5
			wantF := []float32{f0 + 4, f0 + 0.25 + 8, f0*3 + 12, f0 - 7 + 16, f0*0.5 + 20, f0 + 11 + 24, f0*5 + 28, f0 - 0.75 + 32}
			wantI := []uint32{tid*3 + 4, tid ^ 0x55 + 8, tid + 1000 + 12, tid*tid + 16, tid<<3 + 20, ^tid + 24, tid*7 + 1 + 28, tid | 0x100 + 32, tid*11 + 36}
			for k, w := range wantF {
				if got := out.f32()[8*tid+uint32(k)]; got != w {
					t.Fatalf("%v: thread %d: float %d = %v, want %v", order, tid, k, got, w)
				}
			}
			for k, w := range wantI {
				if got := outi.u32()[9*tid+uint32(k)]; got != w {
					t.Fatalf("%v: thread %d: uint %d = %d, want %d", order, tid, k, got, w)
				}
			}
		}
	}
}

const earlyReturnSrc = mslPrelude + `
kernel void early(device float* out [[buffer(0)]],
                  constant uint& quit [[buffer(1)]],
                  uint tid [[thread_index_in_threadgroup]]) {
    if (tid == quit) return;
    threadgroup_barrier(mem_flags::mem_none);
    out[tid] = 1.0;
}
`

// A barrier some thread of the threadgroup returned before is a fault
// naming the barrier's line, whether the thread returns before the others
// reach it (forward order) or while they wait there (reverse order, the
// fault found as the thread's fiber ends).
func TestBarrierAfterEarlyReturnReported(t *testing.T) {
	f := functionT(t, compileT(t, earlyReturnSrc, CompileOptions{}), "early")
	out, quit := newF32(t, 64), newMem(t, 4)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1})}
	d.Buffers[0], d.Buffers[1] = out.binding(), quit.binding()
	for _, c := range []struct {
		order Order
		want  string
	}{
		{Forward, "1 of 64 threads of the threadgroup returned before reaching it"},
		{Reverse, "thread 0 returned while 63 threads wait at it"},
	} {
		quit.u32()[0] = 0
		d.Order = c.order
		_, err := f.Run(d)
		ke := kernelErrorT(t, err)
		if ke.Line != 8 || !contains(ke.Msg, "threadgroup_barrier at line 8 can never complete") || !contains(ke.Msg, c.want) ||
			!contains(ke.Msg, "barrier after an early return") {
			t.Fatalf("%v: %v (line %d), want the barrier at line 8 and %q", c.order, ke, ke.Line, c.want)
		}
		// the device stays usable
		quit.u32()[0] = 64
		poison(out.f32())
		if _, err := f.Run(d); err != nil {
			t.Fatalf("%v: %v", c.order, err)
		}
		for i, v := range out.f32() {
			if v != 1 {
				t.Fatalf("%v: out[%d] = %v, want 1", c.order, i, v)
			}
		}
	}
}
