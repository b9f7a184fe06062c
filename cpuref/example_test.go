package cpuref_test

import (
	"fmt"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/gdn/spec"
)

// One value head with D_k = D_v = 2, two tokens. The first token writes
// v = (3, 4) at key (1, 0) with beta = 0.5; the second decays the state by
// alpha = exp(-g) before its own delta update.
func ExampleReference32() {
	p := spec.Params{
		Shape:   spec.Shape{DK: 2, DV: 2, NKHeads: 1, NVHeads: 1, NTokens: 2, NSeqs: 1},
		HeadMap: spec.Block,
		QScale:  0.5, // out = 0.5 * S q
	}
	in := cpuref.Inputs{
		Q:       []float32{0, 1, 1, 0},     // token 0, token 1
		K:       []float32{1, 0, 0.6, 0.8}, // unit vectors
		V:       []float32{3, 4, 1, -1},
		G:       []float32{0, 0.6931472}, // alpha = 1, then 1/2
		Beta:    []float32{0.5, 0.25},
		StateIn: []float32{1, 0, 0, 2}, // S = [[1, 0], [0, 2]], row-major
	}
	res, err := cpuref.Reference32(p, in, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("output:    %.4f\n", res.Output)
	fmt.Printf("state_out: %.4f\n", res.StateOut)
	fmt.Printf("after t=0: %.4f\n", res.Capture[:4])

	// Bad shapes are errors, not panics.
	in.V = in.V[:3]
	_, err = cpuref.Reference32(p, in, false)
	fmt.Println(err)
	// Output:
	// output:    [0.0000 1.0000 0.5300 0.3200]
	// state_out: [1.0600 0.0800 0.6400 0.5200]
	// after t=0: [2.0000 0.0000 2.0000 2.0000]
	// cpuref: v has 3 elements, shape {D_k=2 D_v=2 n_k_heads=1 n_v_heads=1 n_tokens=2 n_seqs=1} needs 4
}
