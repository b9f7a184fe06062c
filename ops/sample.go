package ops

import (
	"github.com/puremetal/puremetal/kernels"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tensor"
)

// SampleParams is a sampling dispatch: the shape of the logits and the
// sampler's settings, in HF's terms and order (temperature, top-k, top-p,
// min-p).
type SampleParams struct {
	Rows  int // rows of logits, one token drawn from each
	Vocab int // logits per row
	// Temperature divides the logits; 0 picks the argmax (greedy), the
	// other settings unused. Finite and >= 0.
	Temperature float32
	// TopK keeps the TopK largest logits (ties to the lower index); 0
	// turns it off. At most kernels.SampleMaxTopK; a TopK above Vocab is
	// Vocab, as HF clamps it.
	TopK int
	// TopP keeps the most likely tokens until the probability ranked above
	// the next reaches TopP: (0, 1], 1 turns it off. Below 1 it needs
	// TopK: the device does not sort a whole vocabulary.
	TopP float32
	// MinP keeps the tokens at least MinP times as likely as the most
	// likely: [0, 1), 0 turns it off.
	MinP float32
	// RepetitionPenalty is HF's repetition_penalty, applied first to the
	// logits of the tokens Sample's seen set holds: l * penalty where
	// l < 0, l / penalty otherwise. 0 or 1 turns it off; else finite and
	// above 0, and seen must be given.
	RepetitionPenalty float32
	// Seed and Step key the generator: the draw of a row depends only on
	// (Seed, Step, row) and the logits, so a decode loop passes its step
	// and keeps no generator state.
	Seed uint64
	Step uint32
}

// sampleParams is sample_params of sample.metal.
type sampleParams struct {
	Vocab, TopK             uint32
	Temperature, TopP, MinP float32
	SeedLo, SeedHi, Step    uint32
	UseSeen                 uint32
	Penalty                 float32
}

// SeenWords returns the 32-bit words of one row of a seen set over vocab
// tokens: a bit per token.
func SeenWords(vocab int) int { return ceilDiv(vocab, 32) }

// Check refuses what [Kernels.Sample] and [Kernels.Argmax] refuse of p
// itself (the views aside), with an error matching ErrInvalidArgument: a
// caller that batches draws of several requests checks each one first.
func (p SampleParams) Check() error {
	if err := positive(dim{"SampleParams.Rows", p.Rows}, dim{"SampleParams.Vocab", p.Vocab}); err != nil {
		return err
	}
	if r := p.RepetitionPenalty; r != 0 && (!(r > 0) || finite("", r) != nil) {
		return tensor.Invalid("SampleParams.RepetitionPenalty", "%v, must be 0 or 1 (off), or finite and above 0", r)
	}
	switch {
	case !(p.Temperature >= 0) || finite("", p.Temperature) != nil:
		return tensor.Invalid("SampleParams.Temperature", "%v, must be finite and >= 0", p.Temperature)
	case p.Temperature == 0:
		return nil // greedy: the rest is not used
	case p.TopK < 0 || p.TopK > kernels.SampleMaxTopK:
		return tensor.Invalid("SampleParams.TopK", "%d, must be 0 (off) to %d", p.TopK, kernels.SampleMaxTopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return tensor.Invalid("SampleParams.TopP", "%v, must be in (0, 1]", p.TopP)
	case p.TopP < 1 && p.TopK == 0:
		return tensor.Invalid("SampleParams.TopP", "%v needs TopK 1 to %d: top-p over the whole vocabulary would need a sort the device does not do", p.TopP, kernels.SampleMaxTopK)
	case !(p.MinP >= 0 && p.MinP < 1):
		return tensor.Invalid("SampleParams.MinP", "%v, must be in [0, 1)", p.MinP)
	}
	return nil
}

// Sample encodes drawing one token per row of logits ([Rows][Vocab], any
// float type) into tokens (U32 [Rows]), on the device. seen, U32
// [Rows][SeenWords(Vocab)], is the set of tokens each row's sequence holds
// (bit t % 32 of word t / 32 for token t): RepetitionPenalty applies to
// their logits first, and the token drawn is added to it, so a decode loop
// fills it with the prompt once and leaves it to the device; the zero View
// without a RepetitionPenalty. With Temperature 0 the pick is the argmax
// (as [Kernels.Argmax]). Otherwise z = logit / Temperature in float32;
// top-k keeps the TopK largest (ties to the lower index, where HF keeps
// every token tied with the k-th); top-p then keeps a candidate while the
// probability of the candidates ranked above it stays below TopP; min-p
// keeps those with exp(z - z_max) >= MinP; the token is drawn from the
// kept ones in proportion to exp(z) by the Gumbel-max trick with
// Philox4x32-10 noise keyed by Seed and counted by (token, row, Step)
// (kernels/sample.metal has the details; cpuref.Sample32 is the same
// algorithm on the CPU). A row holding a NaN yields its first NaN's index.
// Refused: Rows or Vocab below 1, settings outside the ranges
// SampleParams documents, and views of the wrong type or length.
func (k *Kernels) Sample(enc *mtl.ComputeCommandEncoder, p SampleParams, logits, seen, tokens tensor.View) error {
	if err := p.Check(); err != nil {
		return err
	}
	penalty := p.RepetitionPenalty
	if penalty == 0 {
		penalty = 1
	}
	if penalty != 1 && seen.IsZero() {
		return tensor.Invalid("Seen", "RepetitionPenalty %v needs the set of seen tokens", penalty)
	}
	if err := k.checkLogits(p.Rows, p.Vocab, logits, tokens,
		tensor.Arg{Name: "Seen", View: seen, Type: tensor.U32, Len: elems(p.Rows, SeenWords(p.Vocab)), Formula: "Rows*ceil(Vocab/32)", Written: true, Optional: true},
	); err != nil {
		return err
	}
	entry := kernels.ArgmaxOf(logits.Type)
	sp := sampleParams{Vocab: uint32(p.Vocab), Penalty: penalty}
	if !seen.IsZero() {
		sp.UseSeen = 1
	} else {
		seen = logits // bound, never read
	}
	if p.Temperature > 0 {
		entry = kernels.SampleOf(logits.Type)
		sp.TopK, sp.Temperature, sp.TopP, sp.MinP = uint32(min(p.TopK, p.Vocab)), p.Temperature, p.TopP, p.MinP
		sp.SeedLo, sp.SeedHi, sp.Step = uint32(p.Seed), uint32(p.Seed>>32), p.Step
	}
	return k.pick(enc, entry, p.Rows, p.Vocab, logits, seen, tokens, sp)
}

// Argmax encodes tokens[r] = the index of the largest logit of row r, as
// torch.argmax: NaN above every number, equal values to the lower index.
// logits is [rows][vocab] of any float type, tokens U32 [rows]. Refused:
// rows or vocab below 1, and views of the wrong type or length.
func (k *Kernels) Argmax(enc *mtl.ComputeCommandEncoder, rows, vocab int, logits, tokens tensor.View) error {
	if err := positive(dim{"rows", rows}, dim{"vocab", vocab}); err != nil {
		return err
	}
	return k.Sample(enc, SampleParams{Rows: rows, Vocab: vocab}, logits, tensor.View{}, tokens)
}

func (k *Kernels) checkLogits(rows, vocab int, logits, tokens tensor.View, seen tensor.Arg) error {
	if err := tensor.FloatType("Logits", logits.Type); err != nil {
		return err
	}
	return tensor.Check(k.dev,
		tensor.Arg{Name: "Logits", View: logits, Type: logits.Type, Len: elems(rows, vocab), Formula: "Rows*Vocab"},
		tensor.Arg{Name: "Tokens", View: tokens, Type: tensor.U32, Len: rows, Formula: "Rows", Written: true},
		seen,
	)
}

// pick encodes argmax or sample on checked views: one threadgroup per row
// of enough SIMD-groups to give each thread a few logits, at most 1024
// threads (or what the pipeline allows).
func (k *Kernels) pick(enc *mtl.ComputeCommandEncoder, entry string, rows, vocab int, logits, seen, tokens tensor.View, sp sampleParams) error {
	pso, err := k.pipeline(entry)
	if err != nil {
		return err
	}
	threads := min(roundUp(vocab, simdWidth), 1024, pso.MaxTotalThreadsPerThreadgroup()/simdWidth*simdWidth)
	if threads < simdWidth {
		return tensor.Invalid("Logits", "the %s pipeline allows %d threads per threadgroup, fewer than one SIMD-group", entry, pso.MaxTotalThreadsPerThreadgroup())
	}
	enc.SetComputePipelineState(pso)
	bind(enc, logits, 0)
	bind(enc, tokens, 1)
	mtl.SetValue(enc, sp, 2)
	bind(enc, seen, 3)
	enc.DispatchThreadgroups(mtl.Sz(rows, 1, 1), mtl.Sz(threads, 1, 1))
	return finish(enc, entry)
}
