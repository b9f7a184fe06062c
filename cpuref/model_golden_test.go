package cpuref_test

import (
	"math"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/internal/golden"
)

// top2 returns the index of the largest element of x and the gap to the
// second largest, relative to the largest magnitude.
func top2(x []float64) (best int, margin float64) {
	var mag float64
	for i, v := range x {
		mag = math.Max(mag, math.Abs(v))
		if v > x[best] {
			best = i
		}
	}
	second := math.Inf(-1)
	for i, v := range x {
		if i != best {
			second = math.Max(second, v)
		}
	}
	return best, (x[best] - second) / mag
}

// openModel64 opens the checkpoint in dir and widens it.
func openModel64(t *testing.T, dir string) *cpuref.Model64 {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	md, err := cpuref.NewModel64(ck)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// TestModel64Golden runs every whole-model case present: each prompt's
// prefill, then the truth's tokens one at a time through the caches
// (teacher forcing), comparing every step's logits with the truth's.
//
// The bound. The truth is a float64 run in which, as in HF's own float64
// runs, the RMSNorms and the gated delta rule compute in float32; Model64
// rounds nothing, so its distance from the truth is the effect of those
// float32 roundings alone. The case's float32 peer (HF's or the
// restatement's float32 run) rounds those operations and every other one
// to float32, and its distance from the truth (recorded per prompt) is the
// scale of that effect on this model and prompt: about 1e-6 of the largest
// logit. Model64's error comes from a subset of the peer's roundings but
// not the same rounding pattern as the truth's, so the two errors do not
// cancel and need not be ordered prompt by prompt: the bound is twice the
// peer's distance (the golden README's "small multiple"), per prompt.
//
// The greedy token must be the truth's at every step where the truth's
// top-1/top-2 gap exceeds twice the bound (each logit may move by the
// bound), which on these models is every step.
func TestModel64Golden(t *testing.T) {
	for _, c := range golden.LoadModelSet(t) {
		t.Run(c.Name, func(t *testing.T) {
			md := openModel64(t, c.Dir)
			for pi, p := range c.Prompts {
				bound := 2 * p.F32PeerRel()
				if bound == 0 {
					t.Fatalf("prompt %d: golden.json records no float32 peer distance to derive the bound from", pi)
				}
				cache := md.NewCache()
				logits, hidden, err := md.Hidden(cache, p.Prompt)
				if err != nil {
					t.Fatal(err)
				}
				if pi == 0 {
					checkHidden(t, hidden, p.Hidden, bound)
				}
				step := logits[len(logits)-p.Vocab:]
				var worst float64
				matched, decided := 0, 0
				for s := range p.Tokens {
					if s > 0 {
						if step, err = md.Forward(cache, []int32{p.Tokens[s-1]}); err != nil {
							t.Fatal(err)
						}
					}
					truth := p.Logits[s*p.Vocab : (s+1)*p.Vocab]
					e := relErr64(step, truth)
					worst = max(worst, e)
					if e > bound {
						t.Errorf("prompt %d step %d: logits %.3g of the largest truth logit from the truth, bound %.3g", pi, s, e, bound)
					}
					got, _ := top2(step)
					want, margin := top2(truth)
					if int32(want) != p.Tokens[s] {
						t.Fatalf("prompt %d step %d: the truth's logits pick %d, golden.json's path %d", pi, s, want, p.Tokens[s])
					}
					if got == want {
						matched++
					}
					if margin > 2*bound {
						decided++
						if got != want {
							t.Errorf("prompt %d step %d: greedy token %d, truth %d (truth's margin %.3g > 2 x bound)", pi, s, got, want, margin)
						}
					}
				}
				t.Logf("prompt %d (%d tokens, %d steps): max |logit - truth| / max |truth| = %.3g (bound %.3g); tokens matched %d/%d (%d decided beyond the bound)",
					pi, len(p.Prompt), len(p.Tokens), worst, bound, matched, len(p.Tokens), decided)
			}
		})
	}
}

// checkHidden compares the prefill's hidden states with the truth's
// (prompt 0's hidden_NN), each within the logits' bound relative to its
// own largest magnitude: a layer that parts from the truth shows here
// first.
func checkHidden(t *testing.T, got, want [][]float64, bound float64) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	if len(got) != len(want) {
		t.Errorf("%d hidden states, the truth has %d", len(got), len(want))
		return
	}
	for k := range want {
		if e := relErr64(got[k], want[k]); e > bound {
			t.Errorf("hidden_%02d: %.3g of the largest truth value from the truth, bound %.3g", k, e, bound)
		}
	}
}

// TestModel64CachedDecode checks the caches: a prompt fed whole, in chunks
// shorter than the convolution's window, or one token at a time gives
// the same logits for its last token, bit for bit (every path computes the
// same float64 operations in the same order).
func TestModel64CachedDecode(t *testing.T) {
	for _, c := range golden.LoadModelSet(t) {
		t.Run(c.Name, func(t *testing.T) {
			md := openModel64(t, c.Dir)
			p := c.Prompts[len(c.Prompts)-1]
			prompt := p.Prompt[:min(len(p.Prompt), 9)]
			whole, err := md.Forward(md.NewCache(), prompt)
			if err != nil {
				t.Fatal(err)
			}
			vocab := md.Config.VocabSize
			want := whole[len(whole)-vocab:]
			for _, chunk := range []int{1, 2, 5} {
				cache := md.NewCache()
				var last []float64
				for i := 0; i < len(prompt); i += chunk {
					out, err := md.Forward(cache, prompt[i:min(i+chunk, len(prompt))])
					if err != nil {
						t.Fatal(err)
					}
					last = out[len(out)-vocab:]
				}
				if !slices.Equal(last, want) {
					t.Errorf("chunks of %d: last logits differ from the whole prompt's by %.3g", chunk, relErr64(last, want))
				}
			}
		})
	}
}
