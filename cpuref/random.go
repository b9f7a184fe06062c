package cpuref

import (
	"math"
	"math/rand/v2"

	"github.com/puremetal/puremetal/gdn/spec"
)

// RandomInputs returns inputs for p shaped like a real model's, drawn
// deterministically from seed (the same seed gives the same inputs on
// every platform):
//
//   - q and k: standard normal, then L2-normalised per head and token;
//   - g = exp(A_log) * softplus(a + dt_bias), with A_log = log U(1, 16) and
//     dt_bias ~ N(0, 1) per value head, a ~ N(0, 1) per head and token, so
//     g >= 0 and alpha = exp(-g) lies in (0, 1];
//   - beta = sigmoid(b), b ~ N(0, 1), so beta lies in (0, 1);
//   - v: standard normal;
//   - state_in: normal with standard deviation 0.1.
//
// It returns an error for an invalid p.
func RandomInputs(p spec.Params, seed uint64) (Inputs, error) {
	if err := validParams(p); err != nil {
		return Inputs{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	in := Inputs{
		Q:       make([]float32, p.QKLen()),
		K:       make([]float32, p.QKLen()),
		V:       make([]float32, p.VLen()),
		G:       make([]float32, p.GateLen()),
		Beta:    make([]float32, p.GateLen()),
		StateIn: make([]float32, p.StateLen()),
	}
	for _, x := range [][]float32{in.Q, in.K} {
		for h := 0; h < len(x); h += p.DK {
			head := x[h : h+p.DK]
			var norm float64
			for j := range head {
				head[j] = float32(rng.NormFloat64())
				norm += float64(head[j]) * float64(head[j])
			}
			norm = math.Sqrt(norm)
			for j := range head {
				head[j] = float32(float64(head[j]) / norm)
			}
		}
	}
	for i := range in.V {
		in.V[i] = float32(rng.NormFloat64())
	}
	aLog := make([]float64, p.NVHeads)
	dtBias := make([]float64, p.NVHeads)
	for h := range aLog {
		aLog[h] = math.Log(1 + 15*rng.Float64())
		dtBias[h] = rng.NormFloat64()
	}
	for i := range in.G {
		h := i % p.NVHeads
		in.G[i] = float32(math.Exp(aLog[h]) * softplus(rng.NormFloat64()+dtBias[h]))
		in.Beta[i] = float32(1 / (1 + math.Exp(-rng.NormFloat64())))
	}
	for i := range in.StateIn {
		in.StateIn[i] = float32(0.1 * rng.NormFloat64())
	}
	return in, nil
}

// softplus returns log(1 + e^x) without overflow for large x.
func softplus(x float64) float64 {
	if x > 30 {
		return x
	}
	return math.Log1p(math.Exp(x))
}
