package ops_test

import (
	"math"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
)

// newMetalRig returns a rig on the system's GPU, released when the
// benchmark ends; off a Mac it skips, saying why.
func newMetalRig(b *testing.B) *rig {
	g := testdevice.NewMetal(b)
	k, err := ops.New(g.D, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(k.Release)
	return &rig{GPU: g, k: k}
}

// medianGPUTime calls timed once to warm up (the pipeline is compiled, the
// buffers made resident), then b.N times on the benchmark's clock, and
// returns the median of the GPU seconds it returned, reported as "us". A
// median of 0 (a clock too coarse) is NaN, so that rates over it read as
// unknown rather than infinite.
func medianGPUTime(b *testing.B, timed func() (float64, error)) float64 {
	b.Helper()
	if _, err := timed(); err != nil {
		b.Fatal(err)
	}
	times := make([]float64, 0, b.N)
	b.ResetTimer()
	for range b.N {
		s, err := timed()
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, s)
	}
	b.StopTimer()
	slices.Sort(times)
	m := times[len(times)/2]
	if m == 0 {
		m = math.NaN()
	}
	b.ReportMetric(m*1e6, "us")
	return m
}

// benchGPU runs encode b.N times, each in a command buffer of its own,
// and reports the median GPU time and the bandwidth against floor bytes.
func benchGPU(b *testing.B, g *testdevice.GPU, floor float64, encode func(*mtl.ComputeCommandEncoder) error) {
	m := medianGPUTime(b, func() (float64, error) { return g.Q.RunTimed(encode) })
	b.ReportMetric(floor/m/1e9, "GB/s")
}
