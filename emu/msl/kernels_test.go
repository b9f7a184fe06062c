package msl_test

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/kernels"
	"golang.org/x/sys/unix"
)

// The repository's decode, packed decode, prefill and chunked prefill
// kernels (kernels/*.metal), run by the engine directly on fresh random
// inputs, match the float64 oracle, every output element written: the
// emulated device's own kernels on whatever architecture the engine runs
// on.
func TestRepositoryKernelsMatchOracle(t *testing.T) {
	p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 2}, HeadMap: spec.Tiled, QScale: 0.125}
	in, err := cpuref.RandomInputs(p, 20261201)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpuref.Oracle64(p, in, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range []string{kernels.Decode(p.DK / 32), kernels.DecodePackedOf(spec.F32, spec.F32, p.DK/32), kernels.Prefill, kernels.PrefillChunked} {
		r := newRepoRun(t, entry, p, in)
		counts, err := r.f.Run(r.d)
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		for i := 10; i <= 13; i++ {
			if counts.Loaded[i] != 0 {
				t.Errorf("%s: read %d bytes of buffer(%d), which it has no use for here", entry, counts.Loaded[i], i)
			}
		}
		for _, c := range []struct {
			name string
			got  []float32
			want []float64
		}{{"output", r.out, want.Output}, {"state_out", r.stOut, want.StateOut}} {
			if e := cpuref.MaxRelErr64(c.got, c.want); !(e <= 1e-4) {
				t.Errorf("%s: %s differs from Oracle64 by %g (relative), want at most 1e-4", entry, c.name, e)
			}
		}
	}
}

// repoRun is a repository kernel and a dispatch of it on a shape: buffers
// 0 to 7 hold copies of the inputs' q, k, v, g, beta and state_in, and the
// output and state_out, poisoned (NaN); 8 the parameter words; 10 to 13
// (a_log, dt_bias, slots, cu_seqlens) are bound but unused, as the
// parameters fuse nothing and have no state pool or packed sequences.
type repoRun struct {
	f          *msl.Function
	d          *msl.Dispatch
	out, stOut []float32
}

// newRepoRun compiles the kernel entry (an f32 one of kernels.Decode,
// kernels.DecodePackedOf, kernels.Prefill or kernels.PrefillChunked) and
// sets up its dispatch on p and in, with the grid and threadgroup memory
// package gdn gives it.
func newRepoRun(tb testing.TB, entry string, p spec.Params, in cpuref.Inputs) repoRun {
	tb.Helper()
	if err := msl.Supported(); err != nil {
		tb.Skip(err)
	}
	file, ok := kernels.SourceFile(entry)
	if !ok {
		tb.Fatalf("no kernel %s", entry)
	}
	lib, err := msl.Compile(kernels.Source(file), msl.CompileOptions{FileName: file, CacheDir: benchCache})
	if err != nil {
		testenv.SkipOrFail(tb, err.Error())
	}
	f, err := lib.Function(entry)
	if err != nil {
		tb.Fatal(err)
	}
	s, nsg := p.Shape, p.DK/32
	d := &msl.Dispatch{}
	switch entry {
	case kernels.Decode(nsg):
		d.Grid = msl.ThreadgroupsGrid([3]int{s.DV / nsg, s.NVHeads, s.NSeqs}, [3]int{32, nsg, 1})
	case kernels.DecodePackedOf(spec.F32, spec.F32, nsg):
		d.Grid = msl.ThreadgroupsGrid([3]int{s.DV / 32, s.NVHeads, s.NSeqs}, [3]int{32, 4, 1})
	case kernels.Prefill:
		d.Grid = msl.ThreadgroupsGrid([3]int{s.NVHeads, s.NSeqs, 1}, [3]int{s.DV, 1, 1})
		d.ThreadgroupMemoryLength[0] = (2*s.DK + 2*s.DV) * 4
	case kernels.PrefillChunked:
		d.Grid = msl.ThreadgroupsGrid([3]int{s.NVHeads, s.NSeqs, 1}, [3]int{kernels.ChunkLanes * s.DV, 1, 1})
		d.ThreadgroupMemoryLength[0] = kernels.ChunkedThreadgroupMemory(s.DK, s.DV)
	default:
		tb.Fatalf("no geometry for kernel %s", entry)
	}
	r := repoRun{f: f, d: d, out: floatsMem(tb, p.VLen()), stOut: floatsMem(tb, p.StateLen())}
	nan := math.Float32frombits(0x7fc00bad)
	for _, x := range [][]float32{r.out, r.stOut} {
		for i := range x {
			x[i] = nan
		}
	}
	for i, x := range [][]float32{in.Q, in.K, in.V, in.G, in.Beta, in.StateIn, r.out, r.stOut} {
		if i < 6 {
			x = append(floatsMem(tb, len(x))[:0], x...)
		}
		d.Buffers[i] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&x[0])), Len: 4 * len(x)}
	}
	// the parameter words kernels/gdn_common.metal reads: the shape, head
	// map, fused parts, q scale, then n_slots, varlen, reserved
	params := bytesMem(tb, 48)
	for i, w := range []uint32{uint32(s.DK), uint32(s.DV), uint32(s.NKHeads), uint32(s.NVHeads), uint32(s.NTokens), uint32(s.NSeqs),
		uint32(p.HeadMap), 0, math.Float32bits(p.QScale), 0, 0, 0} {
		binary.LittleEndian.PutUint32(params[4*i:], w)
	}
	d.Buffers[8] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&params[0])), Len: len(params)}
	unused := bytesMem(tb, 16)
	for i := 10; i <= 13; i++ {
		d.Buffers[i] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&unused[0])), Len: len(unused)}
	}
	return r
}

// bytesMem is n bytes outside the Go heap, as kernels require.
func bytesMem(tb testing.TB, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(b) })
	return b
}

func floatsMem(tb testing.TB, n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&bytesMem(tb, 4*n)[0])), n)
}
