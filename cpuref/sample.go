package cpuref

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// SampleConfig is the sampler's settings, in HF's terms: the logits are
// divided by Temperature, then filtered by top-k (TopK 0: off), top-p
// (TopP 1: off) and min-p (MinP 0: off), in that order.
type SampleConfig struct {
	Temperature float32
	TopK        int
	TopP, MinP  float32
}

// Philox4x32 returns the first word of Philox4x32-10 (Salmon et al.,
// SC 2011) of counter c and key k, the generator of the device's sampler.
func Philox4x32(c [4]uint32, k [2]uint32) uint32 {
	for range 10 {
		hi0, lo0 := bits.Mul32(0xD2511F53, c[0])
		hi1, lo1 := bits.Mul32(0xCD9E8D57, c[2])
		c = [4]uint32{hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0}
		k[0] += 0x9E3779B9
		k[1] += 0xBB67AE85
	}
	return c[0]
}

// Gumbel32 returns the sampler's Gumbel noise of token in row and step:
// -log(-log(u)) in float32, u = (the top 24 bits of the Philox word + 1/2)
// / 2^24, counter (token, row, step, 0), key the seed's two halves.
func Gumbel32(seed uint64, step, row, token uint32) float32 {
	x := Philox4x32([4]uint32{token, row, step, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	u := (float32(x>>8) + 0.5) * 0x1p-24
	return -log32(-log32(u))
}

func log32(x float32) float32 { return float32(math.Log(float64(x))) }
func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// rank returns the indices of x in the kernels' rank order: the larger
// value first, NaN above every number, equal values by the lower index.
func rank(x []float32) []int {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) (bool, float32) { return x[i] != x[i], x[i] }
	slices.SortStableFunc(idx, func(a, b int) int {
		an, av := key(a)
		bn, bv := key(b)
		if an != bn {
			if an {
				return -1
			}
			return 1
		}
		if an {
			return 0
		}
		return cmp.Compare(bv, av)
	})
	return idx
}

// Sample32 is the device sampler's algorithm on the CPU, in its float32
// arithmetic and order (kernels/sample.metal says what it computes), for
// one row of logits: the token it draws for seed, step and row. Greedy
// (Temperature 0) is the argmax.
func Sample32(logits []float32, c SampleConfig, seed uint64, step, row uint32) int {
	order := rank(logits)
	if c.Temperature == 0 || logits[order[0]] != logits[order[0]] {
		return order[0]
	}
	t := c.Temperature
	best, bestScore := -1, float32(0)
	offer := func(i int, z float32) {
		s := z + Gumbel32(seed, step, row, uint32(i))
		if best < 0 || s > bestScore || s == bestScore && i < best || s != s && bestScore == bestScore {
			best, bestScore = i, s
		}
	}
	if c.TopK == 0 {
		zmax := logits[order[0]] / t
		for i, l := range logits {
			z := l / t
			if c.MinP > 0 && !(exp32(z-zmax) >= c.MinP) {
				continue
			}
			offer(i, z)
		}
		return best
	}
	cand := order[:min(c.TopK, len(order))]
	z0 := logits[cand[0]] / t
	var total float32
	for _, i := range cand {
		total += exp32(logits[i]/t - z0)
	}
	var above float32
	for j, i := range cand {
		z := logits[i] / t
		e := exp32(z - z0)
		if j > 0 && (!(above < c.TopP*total) || !(e >= c.MinP)) {
			break
		}
		above += e
		offer(i, z)
	}
	return best
}

// SampleProbs64 returns the distribution HF's warpers leave for one row of
// logits (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper,
// MinPLogitsWarper, then softmax), in float64, with ties at the top-k
// boundary broken by the lower index as the device does.
func SampleProbs64(logits []float32, c SampleConfig) []float64 {
	order := rank(logits)
	n := len(order)
	if c.TopK > 0 {
		n = min(n, c.TopK)
	}
	z := make([]float64, len(logits))
	for i, l := range logits {
		z[i] = float64(l) / float64(c.Temperature)
	}
	e := make([]float64, n)
	var total float64
	for j := range n {
		e[j] = math.Exp(z[order[j]] - z[order[0]])
		total += e[j]
	}
	p := make([]float64, len(logits))
	var above, kept float64
	for j := range n {
		if j > 0 && (above/total >= float64(c.TopP) || e[j] < float64(c.MinP)) {
			break
		}
		above += e[j]
		p[order[j]] = e[j]
		kept += e[j]
	}
	for i := range p {
		p[i] /= kept
	}
	return p
}
