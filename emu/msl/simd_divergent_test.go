package msl

import (
	"strings"
	"testing"
)

// SIMD-group functions called from divergent control flow run with the
// lanes that reach the call together (the active lanes): reductions,
// prefix operations, votes and masks cover those lanes only, a shuffle of
// a kernel's variable from an inactive lane returns that lane's current
// value of it (as Apple GPUs do), a shuffle of an expression from one the
// caller's own value (the GPU's is undefined), and the lanes that skipped a
// branch join the others at the next call after it.
const simdDivergentSrc = mslPrelude + `kernel void k(device uint* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]],
              uint tid [[thread_index_in_threadgroup]]) {
    threadgroup uint tg[64];
    uint base = 96 * (tid / 32);
    uint v = lane;
    if (lane < 16) v = simd_sum(v);
    out[base + lane] = v;
    out[base + 32 + lane] = simd_sum(1u);
    uint x = lane + 1u;
    for (ushort d = 1; d < 32; d *= 2) {
        if (lane >= d) x += simd_shuffle_up(x, d);
    }
    out[base + 64 + lane] = x;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint r = 0;
    if (lane % 3 == 0) {
        r = uint(ulong(simd_active_threads_mask())) ^ uint(ulong(simd_ballot(lane > 10))) ^ (simd_is_first() ? 1u << 31 : 0u);
    } else if (lane < 16) {
        r = simd_shuffle_xor(lane * 10u, ushort(1)) + simd_shuffle_down(lane * 100u, ushort(8)) * 1000u;
        r += simd_broadcast_first(lane) << 24;
    } else {
        r = simd_prefix_exclusive_sum(1u) + (quad_sum(lane) << 8);
        tg[tid] = lane;
        simdgroup_barrier(mem_flags::mem_threadgroup);
        r += tg[tid ^ 1] << 20;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[192 + tid] = r;
}
`

func TestSIMDDivergent(t *testing.T) {
	lib := compileT(t, simdDivergentSrc, CompileOptions{})
	f := functionT(t, lib, "k")
	for _, order := range []Order{Forward, Reverse, Shuffled} {
		out := newMem(t, 4*256)
		d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{64, 1, 1}), Order: order}
		d.Buffers[0] = out.binding()
		if _, err := f.Run(d); err != nil {
			t.Fatalf("order %v: %v", order, err)
		}
		// the scan: lanes >= d add lane - d's current value, active or
		// not, which gives the inclusive prefix sums of lane + 1
		x := make([]uint32, 32)
		for l := range x {
			x[l] = uint32((l + 1) * (l + 2) / 2)
		}
		var mask3, ballot uint32
		for l := 0; l < 32; l += 3 {
			mask3 |= 1 << l
			if l > 10 {
				ballot |= 1 << l
			}
		}
		for sg := range 2 {
			for l := range 32 {
				o := out.u32()[96*sg:]
				want := uint32(l)
				if l < 16 {
					want = 120
				}
				if o[l] != want || o[32+l] != 32 || o[64+l] != x[l] {
					t.Errorf("order %v, SIMD-group %d, lane %d: sum in branch %d (want %d), after it %d (want 32), scan %d (want %d)",
						order, sg, l, o[l], want, o[32+l], o[64+l], x[l])
				}
				var w uint32
				switch {
				case l%3 == 0:
					w = mask3 ^ ballot
					if l == 0 {
						w ^= 1 << 31
					}
				case l < 16:
					// active: 1, 2, 4, 5, 7, 8, 10, 11, 13, 14
					xs, dn := uint32(l)*10, uint32(l)*100
					if p := l ^ 1; p%3 != 0 && p < 16 {
						xs = uint32(p) * 10
					}
					if p := l + 8; p%3 != 0 && p < 16 {
						dn = uint32(p) * 100
					}
					w = xs + dn*1000 + 1<<24
				default:
					// active: 16..31 but the multiples of 3
					pre := uint32(0)
					for j := 16; j < l; j++ {
						if j%3 != 0 {
							pre++
						}
					}
					qs := uint32(0)
					for j := l &^ 3; j < l&^3+4; j++ {
						if j%3 != 0 {
							qs += uint32(j)
						}
					}
					w = pre + qs<<8
					// tg[tid ^ 1]: the partner's lane when it stored in this
					// branch, else the NaN fill's low 12 bits shifted out of 32
					if p := l ^ 1; p%3 != 0 {
						w += uint32(p) << 20
					} else {
						w += 0xFFF00000
					}
				}
				if g := out.u32()[192+32*sg+l]; g != w {
					t.Errorf("order %v, SIMD-group %d, lane %d: branch result %#x, want %#x", order, sg, l, g, w)
				}
			}
		}
	}
}

// Barriers still need every thread of the threadgroup: one reached in a
// branch is an error, also after SIMD-group functions of the other lanes.
func TestSIMDDivergentBarrier(t *testing.T) {
	lib := compileT(t, mslPrelude+`kernel void k(device float* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    if (lane < 16) {
        threadgroup_barrier(mem_flags::mem_none);
    } else {
        v = simd_sum(v);
        threadgroup_barrier(mem_flags::mem_none);
    }
    out[lane] = v;
}
`, CompileOptions{})
	out := newF32(t, 32)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := functionT(t, lib, "k").Run(d)
	ke := kernelErrorT(t, err)
	if !strings.Contains(ke.Msg, "different barriers") || !strings.Contains(ke.Msg, "line 6") || !strings.Contains(ke.Msg, "line 9") {
		t.Fatalf("got %v, want threads waiting at different barriers at lines 6 and 9", err)
	}
}

// Lanes of a branch exchanging values through threadgroup memory without
// a SIMD-group function or simdgroup_barrier between them race, as
// without divergence.
func TestSIMDDivergentRace(t *testing.T) {
	lib := compileT(t, mslPrelude+`kernel void k(device uint* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
    threadgroup uint tg[32];
    uint r = 0;
    if (lane < 16) {
        r = simd_sum(lane);
        tg[lane] = r;
        r += tg[lane ^ 1];
    }
    out[lane] = r;
}
`, CompileOptions{})
	out := newMem(t, 4*32)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{32, 1, 1})}
	d.Buffers[0] = out.binding()
	_, err := functionT(t, lib, "k").Run(d)
	ke := kernelErrorT(t, err)
	if !strings.Contains(ke.Msg, "threadgroup memory race") || ke.Line != 7 && ke.Line != 8 {
		t.Fatalf("got %v, want a race between lines 7 and 8", err)
	}
}
