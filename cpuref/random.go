package cpuref

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/puremetal/puremetal/gdn/spec"
)

// RandomInputs returns inputs for p shaped like a real model's, drawn
// deterministically from seed (the same seed gives the same inputs on
// every platform):
//
//   - q and k: standard normal, then L2-normalised per head and token, or
//     left raw when p.Fused.L2Norm is set (the kernel normalises them);
//
//   - g = exp(A_log) * softplus(a + dt_bias), with A_log = log U(1, 16) and
//     dt_bias ~ N(0, 1) per value head, a ~ N(0, 1) per head and token, so
//     g >= 0 and alpha = exp(-g) lies in (0, 1]; with p.Fused.Gate, g holds
//     a and the inputs carry A_log and dt_bias instead;
//
//   - beta = sigmoid(b), b ~ N(0, 1), so beta lies in (0, 1); with
//     p.Fused.Beta, beta holds b;
//
//   - v: standard normal;
//
//   - state_in: normal with standard deviation 0.1;
//
//   - slots, with a state pool: distinct slots of the pool in random
//     order, -1 (padding) for sequences beyond n_slots;
//
//   - cu_seqlens, with Varlen: the tokens split at n_seqs-1 cut points
//     drawn uniformly, so empty sequences occur;
//
//   - with p.Core.Conv (the layer core's convolution), MixedQKV and
//     ConvState standard normal and ConvWeight normal with standard
//     deviation 0.5; q, k and v are then the convolution's to compute,
//     and Q, K and V are nil;
//
//   - with p.Core.Norm (its gated RMSNorm), Z standard normal and
//     NormWeight 1 + 0.1 N(0, 1).
//
// q, k, v, g, beta and the core's inputs are then rounded to p.Activation
// and state_in to p.State (see [Round]); A_log and dt_bias stay float32.
// The same seed draws the same numbers whatever p's types, fused parts
// and core, so the inputs of two such calls differ only by those choices
// (the core's inputs come from a generator of their own).
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
			if p.Fused.L2Norm {
				continue
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
	if p.Fused.Gate {
		in.ALog, in.DtBias = round32(aLog), round32(dtBias)
	}
	for i := range in.G {
		h := i % p.NVHeads
		a, b := rng.NormFloat64(), rng.NormFloat64()
		if p.Fused.Gate {
			in.G[i] = float32(a)
		} else {
			in.G[i] = float32(math.Exp(aLog[h]) * softplus(a+dtBias[h]))
		}
		if p.Fused.Beta {
			in.Beta[i] = float32(b)
		} else {
			in.Beta[i] = float32(1 / (1 + math.Exp(-b)))
		}
	}
	for i := range in.StateIn {
		in.StateIn[i] = float32(0.1 * rng.NormFloat64())
	}
	for _, x := range [][]float32{in.Q, in.K, in.V, in.G, in.Beta} {
		Round(p.Activation, x)
	}
	Round(p.State, in.StateIn)
	if p.NSlots > 0 {
		in.Slots = randomSlots(rng, p.NSeqs, p.NSlots)
	}
	if p.Varlen {
		in.CuSeqlens = randomCuSeqlens(rng, p.NSeqs, p.NTokens)
	}
	randomCore(p, rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d)), &in)
	return in, nil
}

// randomCore draws the buffers of the layer core p.Core asks for: with
// the convolution, mixed_qkv and the conv state standard normal and the
// conv weight normal with sd 0.5 (q, k and v are then the convolution's,
// so their buffers are dropped); with the norm, z standard normal and
// norm_w 1 + 0.1 N(0, 1). All rounded to p.Activation. They come from a
// generator of their own, so the other inputs stay those of the same seed
// without the core.
func randomCore(p spec.Params, rng *rand.Rand, in *Inputs) {
	normal := func(n int, mean, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(mean + sd*rng.NormFloat64())
		}
		Round(p.Activation, x)
		return x
	}
	if p.Core.Conv > 0 {
		in.Q, in.K, in.V = nil, nil, nil
		in.MixedQKV = normal(p.MixedLen(), 0, 1)
		in.ConvWeight = normal(p.ConvWeightLen(), 0, 0.5)
		in.ConvState = normal(p.ConvStateLen(), 0, 1)
	}
	if p.Core.Norm {
		in.Z = normal(p.ZLen(), 0, 1)
		in.NormWeight = normal(p.DV, 1, 0.1)
	}
}

// randomSlots returns distinct slots of a pool of nSlots in random order
// for nSeqs sequences, -1 (padding) for those beyond the pool.
func randomSlots(rng *rand.Rand, nSeqs, nSlots int) []int32 {
	slots := make([]int32, nSeqs)
	perm := rng.Perm(nSlots)
	for s := range slots {
		slots[s] = -1
		if s < nSlots {
			slots[s] = int32(perm[s])
		}
	}
	return slots
}

// randomCuSeqlens splits nTokens tokens into nSeqs sequences of random
// lengths (0 among them) and returns the cumulative lengths.
func randomCuSeqlens(rng *rand.Rand, nSeqs, nTokens int) []int32 {
	cu := make([]int32, nSeqs+1)
	for s := 1; s < nSeqs; s++ {
		cu[s] = int32(rng.IntN(nTokens + 1))
	}
	cu[nSeqs] = int32(nTokens)
	slices.Sort(cu)
	return cu
}
