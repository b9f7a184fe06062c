package cpuref_test

import (
	"math"
	"testing"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/internal/golden"
)

// relTo returns max_i |got_i - want_i| / max_i |want_i|.
func relTo(got, want []float64) float64 {
	var diff, mag float64
	for i := range want {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		diff, mag = math.Max(diff, d), math.Max(mag, math.Abs(want[i]))
	}
	return diff / mag
}

func argmax(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func TestModel64Golden(t *testing.T) {
	for _, c := range golden.LoadModelSet(t) {
		t.Run(c.Name, func(t *testing.T) {
			ck, err := checkpoint.Open(c.Dir)
			if err != nil {
				t.Fatal(err)
			}
			md, err := cpuref.NewModel64(ck)
			ck.Close()
			if err != nil {
				t.Fatal(err)
			}
			for pi, p := range c.Prompts {
				cache := md.NewCache()
				var worst float64
				var logits []float64
				var hidden [][]float64
				if pi == 0 {
					logits, hidden, err = md.Hidden(cache, p.Prompt)
				} else {
					logits, err = md.Forward(cache, p.Prompt)
				}
				if err != nil {
					t.Fatal(err)
				}
				for k, hk := range hidden {
					if k < len(p.Hidden) {
						n := len(hk) / len(p.Prompt)
						t.Logf("hidden_%02d: %.3g", k, relTo(hk, p.Hidden[k][len(p.Hidden[k])-len(hk):][:len(hk)]))
						_ = n
					}
				}
				step := logits[len(logits)-p.Vocab:]
				for s := range p.Tokens {
					if s > 0 {
						if step, err = md.Forward(cache, []int{p.Tokens[s-1]}); err != nil {
							t.Fatal(err)
						}
					}
					truth := p.Logits[s*p.Vocab : (s+1)*p.Vocab]
					e := relTo(step, truth)
					worst = max(worst, e)
					if argmax(step) != p.Tokens[s] {
						t.Errorf("prompt %d step %d: argmax %d, truth %d", pi, s, argmax(step), p.Tokens[s])
					}
				}
				t.Logf("prompt %d (%d tokens): max rel %.3g, f32 peer %.3g", pi, len(p.Prompt), worst, p.F32PeerRel())
			}
		})
	}
}
