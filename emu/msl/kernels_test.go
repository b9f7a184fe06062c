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

// The repository's decode, packed decode, prefill and chunked prefill kernels
// (kernels/*.metal), run by the engine directly on fresh random inputs,
// match the float64 oracle, every output element written: the emulated
// device's own kernels on whatever architecture the engine runs on.
func TestRepositoryKernelsMatchOracle(t *testing.T) {
	if err := msl.Supported(); err != nil {
		t.Skip(err)
	}
	p := spec.Params{Shape: spec.Shape{DK: 128, DV: 128, NKHeads: 2, NVHeads: 4, NTokens: 3, NSeqs: 2}, HeadMap: spec.Tiled, QScale: 0.125}
	in, err := cpuref.RandomInputs(p, 20261201)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpuref.Oracle64(p, in, false)
	if err != nil {
		t.Fatal(err)
	}
	s, nsg := p.Shape, p.DK/32
	for _, c := range []struct {
		entry string
		grid  msl.Grid
		tgMem int
	}{
		{kernels.Decode(nsg), msl.ThreadgroupsGrid([3]int{s.DV / nsg, s.NVHeads, s.NSeqs}, [3]int{32, nsg, 1}), 0},
		{kernels.DecodePackedOf(spec.F32, spec.F32, nsg), msl.ThreadgroupsGrid([3]int{s.DV / 32, s.NVHeads, s.NSeqs}, [3]int{32, 4, 1}), 0},
		{kernels.Prefill, msl.ThreadgroupsGrid([3]int{s.NVHeads, s.NSeqs, 1}, [3]int{s.DV, 1, 1}), (2*s.DK + 2*s.DV) * 4},
		{kernels.PrefillChunked, msl.ThreadgroupsGrid([3]int{s.NVHeads, s.NSeqs, 1}, [3]int{kernels.ChunkLanes * s.DV, 1, 1}), kernels.ChunkedThreadgroupMemory(s.DK, s.DV)},
	} {
		file, _ := kernels.SourceFile(c.entry)
		lib, err := msl.Compile(kernels.Source(file), msl.CompileOptions{FileName: file, CacheDir: benchCache})
		if err != nil {
			testenv.SkipOrFail(t, err.Error())
		}
		f, err := lib.Function(c.entry)
		if err != nil {
			t.Fatal(err)
		}
		d := &msl.Dispatch{Grid: c.grid}
		d.ThreadgroupMemoryLength[0] = c.tgMem
		out, stOut := floatsMem(t, len(want.Output)), floatsMem(t, len(want.StateOut))
		for i, x := range [][]float32{in.Q, in.K, in.V, in.G, in.Beta, in.StateIn, out, stOut} {
			d.Buffers[i] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&x[0])), Len: 4 * len(x)}
		}
		nan := math.Float32frombits(0x7fc00bad)
		for _, x := range [][]float32{out, stOut} {
			for i := range x {
				x[i] = nan
			}
		}
		// the parameter words kernels/gdn_common.metal reads: the shape,
		// head map, fused parts, q scale, then n_slots, varlen, reserved
		params := bytesMem(t, 48)
		for i, w := range []uint32{uint32(s.DK), uint32(s.DV), uint32(s.NKHeads), uint32(s.NVHeads), uint32(s.NTokens), uint32(s.NSeqs),
			uint32(p.HeadMap), 0, math.Float32bits(p.QScale), 0, 0, 0} {
			binary.LittleEndian.PutUint32(params[4*i:], w)
		}
		d.Buffers[8] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&params[0])), Len: len(params)}
		// a_log, dt_bias, slots and cu_seqlens are bound but not read
		// without the fused gate, a state pool or packed sequences
		unused := bytesMem(t, 16)
		for i := 10; i <= 13; i++ {
			d.Buffers[i] = msl.Binding{Ptr: uintptr(unsafe.Pointer(&unused[0])), Len: len(unused)}
		}
		counts, err := f.Run(d)
		if err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		for i := 10; i <= 13; i++ {
			if counts.Loaded[i] != 0 {
				t.Errorf("%s: read %d bytes of buffer(%d), which it has no use for here", c.entry, counts.Loaded[i], i)
			}
		}
		for _, r := range []struct {
			name string
			got  []float32
			want []float64
		}{{"output", out, want.Output}, {"state_out", stOut, want.StateOut}} {
			if e := cpuref.MaxRelErr64(r.got, r.want); !(e <= 1e-4) {
				t.Errorf("%s: %s differs from Oracle64 by %g (relative), want at most 1e-4", c.entry, r.name, e)
			}
		}
	}
}

// bytesMem is n bytes outside the Go heap, as kernels require.
func bytesMem(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func floatsMem(t *testing.T, n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&bytesMem(t, 4*n)[0])), n)
}
