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

// The fused step of a layer with bfloat16 activations: raw q and k, the raw
// gate projections a (in G) and b (in Beta), and the layer's A_log and
// dt_bias. The inputs are bfloat16 values, as a bf16 buffer widens to;
// Round makes them so. The output is rounded to bfloat16 once.
func ExampleReference32_fused() {
	p := spec.Params{
		Shape:      spec.Shape{DK: 2, DV: 2, NKHeads: 1, NVHeads: 1, NTokens: 1, NSeqs: 1},
		Activation: spec.BF16,
		Fused:      spec.FusedAll,
	}
	in := cpuref.Inputs{
		Q:       []float32{3, 4}, // normalised to (0.6, 0.8) by the step
		K:       []float32{0, 2}, // normalised to (0, 1)
		V:       []float32{1, -1},
		G:       []float32{0.5},        // a
		Beta:    []float32{0},          // b: beta = sigmoid(0) = 0.5
		StateIn: []float32{0, 0, 0, 0}, // state type f32
		ALog:    []float32{0},          // exp(A_log) = 1
		DtBias:  []float32{-0.5},       // g = softplus(0.5 - 0.5) = log 2: alpha = 1/2
	}
	cpuref.Round(p.Activation, in.Q) // already bf16 values here; a no-op
	res, err := cpuref.Reference32(p, in, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	truth, err := cpuref.Oracle64(p, in, false)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("output:    %.6f\n", res.Output)
	fmt.Printf("truth:     %.6f\n", truth.Output)
	fmt.Printf("state_out: %.4f\n", res.StateOut)

	in.V[0] = 0.1 // not a bfloat16 value
	_, err = cpuref.Reference32(p, in, false)
	fmt.Println(err)
	// Output:
	// output:    [0.400391 -0.400391]
	// truth:     [0.400000 -0.400000]
	// state_out: [0.0000 0.5000 0.0000 -0.5000]
	// cpuref: v[0] = 0.1 is not a value of Params.Activation = bf16; round the inputs with Round
}
