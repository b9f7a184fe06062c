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
