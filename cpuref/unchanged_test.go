package cpuref_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/floats"
)

// digest hashes the bit patterns of float32 and float64 slices in order.
func digest(xs ...any) string {
	h := sha256.New()
	var b [8]byte
	for _, x := range xs {
		switch x := x.(type) {
		case []float32:
			h.Write(floats.Bytes(x...))
		case []float64:
			for _, v := range x {
				binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
				h.Write(b[:])
			}
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:12])
}

// TestF32UnfusedUnchanged pins the bits of RandomInputs, Reference32 and
// Oracle64 for float32 types and no fused part, the zero values of the
// new parameters: the digests were recorded from the references as they
// were before element types and the fused step existed, so the calls that
// predate them give the same bits. Oracle64's float64 sums may be fused
// into multiply-adds by the compiler on arm64 and other platforms, so its
// digest is pinned on amd64 alone, where Go never fuses them.
func TestF32UnfusedUnchanged(t *testing.T) {
	cases := []struct {
		p            spec.Params
		seed         uint64
		in, ref, ora string
	}{
		{params(16, 8, 2, 4, 3, 2, spec.Block, 0.25), 7, "98309b7e1d3a3ddbc935a9ff", "28cccad2fa97e37d8c8c7d0c", "76c5378478edc4ec51742841"},
		{params(32, 16, 1, 3, 5, 1, spec.Tiled, 0), 8, "522f9d3725bb3e512fdb34cc", "a874ddd47f7f198428daa551", "2c041823fb83bf31a9f83697"},
		{params(128, 128, 1, 2, 2, 1, spec.Block, 0.0883883), 9, "bd1971d2c258409345f64d4c", "b37ab836c5f14c38bf72f257", "9487261408a542261730da9f"},
	}
	for _, c := range cases {
		in := random(t, c.p, c.seed)
		ref := run32(t, c.p, in, true)
		ora := run64(t, c.p, in, true)
		got := [3]string{
			digest(in.Q, in.K, in.V, in.G, in.Beta, in.StateIn),
			digest(ref.Output, ref.StateOut, ref.Capture),
			digest(ora.Output, ora.StateOut, ora.Capture),
		}
		t.Logf("%v seed %d: %q, %q, %q", c.p.Shape, c.seed, got[0], got[1], got[2])
		want := [3]string{c.in, c.ref, c.ora}
		if runtime.GOARCH != "amd64" {
			got[2], want[2] = "", ""
		}
		if got != want {
			t.Errorf("%v seed %d: digests (inputs, Reference32, Oracle64) %q, want %q", c.p.Shape, c.seed, got, want)
		}
	}
}
