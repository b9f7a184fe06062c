package textgen

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The stopper, on text cut into pieces at random: what it gives out is the
// text up to the first match of any stop sequence (all of it when none
// matches), and it stops exactly when one matches; nothing is given out
// that could still start a stop sequence.
func TestStopper(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab c\n"
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for trial := range 2000 {
		text := word(r.IntN(40))
		var stops []string
		for range r.IntN(4) {
			stops = append(stops, word(1+r.IntN(4)))
		}
		want, wantStop := text, false
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && i < len(want) {
				want, wantStop = text[:i], true
			}
		}
		st := newStopper(stops)
		var got strings.Builder
		stopped := false
		for rest := text; ; {
			n := min(len(rest), r.IntN(5))
			piece, final := rest[:n], n == len(rest)
			rest = rest[n:]
			out, s := st.push(piece, final)
			got.WriteString(out)
			if !s && !final {
				// Nothing given out may be the start of a stop sequence.
				for _, stop := range stops {
					for k := 1; k < len(stop); k++ {
						if strings.HasSuffix(got.String(), stop[:k]) && strings.HasPrefix(text[got.Len():], stop[k:]) {
							t.Fatalf("trial %d: %q given out, which with the rest starts %q", trial, got.String(), stop)
						}
					}
				}
			}
			if s {
				stopped = true
				break
			}
			if final {
				break
			}
		}
		if got.String() != want || stopped != wantStop {
			t.Fatalf("trial %d: text %q, stops %q: gave %q (stopped %v), want %q (stopped %v)", trial, text, stops, got.String(), stopped, want, wantStop)
		}
	}
}
