package ops_test

import (
	"math/rand/v2"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// The buffer indices of matmul.metal, as the emulator's counters name
// them.
const bindW, bindX, bindY = 0, 1, 2

// trafficCase is one product whose bytes the emulator counts.
type trafficCase struct {
	name       string
	wt, at     tensor.ElemType
	n, in, out int
	matmul     bool // MatMul, not MatVec
}

// TestMatMulTraffic counts the bytes each product loads and stores
// (emu.DispatchCounters) against the floor: W once, x once, y once.
//
// The matvec must load W exactly once whatever n is (out a multiple of 4:
// a SIMD-group straddling out reads its last row again) and store y
// exactly once; the matmul loads W exactly ceil(n / 32) times (once per
// row of tiles: the re-read factor) and x ceil(out / 32) times. The x
// loads of the matvec are logged, not bounded: the emulator counts every
// load a thread issues, and every SIMD-group reads all of x, which a
// GPU's caches serve (x is 1/out of W's size per row of x). The last
// cases are real shapes (Qwen3-Next / Qwen3.5: hidden 2048, bf16 weights)
// or slices of them: 4096 of the lm_head's 151936 rows, whose traffic
// per row is the same.
func TestMatMulTraffic(t *testing.T) {
	cases := []trafficCase{
		{"matvec bf16 x f32, 1 row", tensor.BF16, tensor.F32, 1, 520, 64, false},
		{"matvec f16 x bf16, 8 rows", tensor.F16, tensor.BF16, 8, 259, 36, false},
		{"matvec f32 x f16, 3 rows", tensor.F32, tensor.F16, 3, 128, 20, false},
		{"matmul bf16 x bf16, 40 rows", tensor.BF16, tensor.BF16, 40, 48, 70, true},
		{"matmul f32 x f32, 9 rows", tensor.F32, tensor.F32, 9, 17, 33, true},
	}
	if !testing.Short() {
		cases = append(cases,
			trafficCase{"matvec 2048 x 2048 bf16 (q/o projections), 1 row", tensor.BF16, tensor.BF16, 1, 2048, 2048, false},
			trafficCase{"matvec lm_head slice 4096 x 2048 bf16, 1 row", tensor.BF16, tensor.BF16, 1, 2048, 4096, false},
			trafficCase{"matmul 512 x 2048 bf16 (an expert's gate), 64 rows", tensor.BF16, tensor.BF16, 64, 2048, 512, true},
		)
	}
	r := newRig(t, testdevice.Orders[0])
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(uint64(c.in), uint64(c.out)))
		w := r.view(c.wt, random(rng, c.out*c.in, 1))
		x := r.view(c.at, random(rng, c.n*c.in, 1))
		y := r.empty(c.at, c.n*c.out)
		f := r.k.MatVec
		if c.matmul {
			f = r.k.MatMul
		}
		got := r.counters(func(enc *mtl.ComputeCommandEncoder) error {
			return f(enc, w, x, tensor.View{}, y, c.n, c.in, c.out)
		})
		wOnce, xOnce, yOnce := uint64(w.Bytes()), uint64(x.Bytes()), uint64(y.Bytes())
		wTimes, xTimes := uint64(1), uint64(0)
		if c.matmul {
			wTimes, xTimes = uint64(ceil(c.n, 32)), uint64(ceil(c.out, 32))
		}
		if got.Loaded[bindW] != wTimes*wOnce {
			t.Errorf("%s: W loaded %d bytes, want %d times its %d bytes", c.name, got.Loaded[bindW], wTimes, wOnce)
		}
		if xTimes != 0 && got.Loaded[bindX] != xTimes*xOnce {
			t.Errorf("%s: x loaded %d bytes, want %d times its %d bytes", c.name, got.Loaded[bindX], xTimes, xOnce)
		}
		if got.Stored[bindY] != yOnce || got.Loaded[bindY] != 0 {
			t.Errorf("%s: y stored %d bytes and loaded %d, want stored once, %d bytes, and not loaded", c.name, got.Stored[bindY], got.Loaded[bindY], yOnce)
		}
		var total uint64
		for i := range got.Loaded {
			total += got.Loaded[i] + got.Stored[i]
		}
		floor := wOnce + xOnce + yOnce
		t.Logf("%-52s W %6.2f MiB x %2d, x %8d B loaded (%5.1f x), y %7d B: %6.3f x the floor %.2f MiB (thread-issued)",
			c.name, mib(wOnce), got.Loaded[bindW]/wOnce, got.Loaded[bindX], float64(got.Loaded[bindX])/float64(xOnce),
			got.Stored[bindY], float64(total)/float64(floor), mib(floor))
	}
}

// TestGatherMatVecTraffic checks that the gathered matvec loads the
// weights of the selected experts exactly once per (token, expert) pair
// and no others, nothing for an id beyond the experts, and stores y once;
// then logs a Qwen3-Next-sized expert projection (in 2048, out 512, bf16,
// top-10; 16 experts stand for the 512 of the model: the bytes read do not
// depend on how many there are).
func TestGatherMatVecTraffic(t *testing.T) {
	type gcase struct {
		g   ops.Gather
		ids []uint32
	}
	cases := []gcase{
		{ops.Gather{Tokens: 2, TopK: 3, Experts: 6, In: 40, Out: 12}, []uint32{0, 5, 2, 5, 1, 99}},
		{ops.Gather{Tokens: 1, TopK: 2, Experts: 3, In: 33, Out: 20, XPerSlot: true}, []uint32{2, 1}},
	}
	if !testing.Short() {
		cases = append(cases, gcase{ops.Gather{Tokens: 1, TopK: 10, Experts: 16, In: 2048, Out: 512}, []uint32{3, 15, 0, 7, 9, 1, 12, 4, 11, 6}})
	}
	r := newRig(t, testdevice.Orders[0])
	for _, c := range cases {
		g := c.g
		rng := rand.New(rand.NewPCG(uint64(g.In), uint64(g.Out)))
		xRows := g.Tokens
		if g.XPerSlot {
			xRows *= g.TopK
		}
		w := r.view(tensor.BF16, random(rng, g.Experts*g.Out*g.In, 1))
		x := r.view(tensor.BF16, random(rng, xRows*g.In, 1))
		y := r.empty(tensor.BF16, g.Tokens*g.TopK*g.Out)
		ids := ints(r, tensor.U32, c.ids)
		cs := r.counters(func(enc *mtl.ComputeCommandEncoder) error { return r.k.GatherMatVec(enc, w, x, ids, y, g) })
		valid := 0
		for _, id := range c.ids {
			if int(id) < g.Experts {
				valid++
			}
		}
		matrix := uint64(g.Out * g.In * 2)
		if got := cs.Loaded[bindW]; got != uint64(valid)*matrix {
			t.Errorf("%+v: W loaded %d bytes, want %d valid ids * %d bytes", g, got, valid, matrix)
		}
		if got := cs.Stored[bindY]; got != uint64(y.Bytes()) {
			t.Errorf("%+v: y stored %d bytes, want once: %d", g, got, y.Bytes())
		}
		t.Logf("gather %d tokens x top-%d of %d experts, [%d][%d] bf16: W loaded %.2f MiB = %d experts' matrices once",
			g.Tokens, g.TopK, g.Experts, g.Out, g.In, mib(cs.Loaded[bindW]), valid)
	}
}

func ceil(a, b int) int { return (a + b - 1) / b }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
