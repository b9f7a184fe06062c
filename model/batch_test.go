package model_test

import (
	"context"
	"errors"
	"iter"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/model"
)

// TestDecodeBatchInvariant decodes several sequences in one pass and each
// alone, and checks every row's logits are bitwise the same: the
// arithmetic of a row does not depend on the rows beside it, the
// contract a Batcher's outputs rest on. 12 rows pass the matvec's
// ops.MatVecMaxRows, so the products run in groups; the hybrid cases
// cover the linear-attention core, and the mixture of experts the
// router and the gathered products.
func TestDecodeBatchInvariant(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    int
	}{{"qwen3_dense_bf16", 12}, {"qwen35_dense_bf16", 12}, {"qwen35moe_bf16", 9}} {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k
			s, c := loadSession(t, tc.name, model.Options{Slots: 2 * k, MaxLen: 64, Chunk: 8})
			vocab := s.Model().Config.VocabSize
			batch, alone := make([]int, k), make([]int, k)
			toks := make([]int32, k)
			for i := range k {
				p := c.Prompts[i%len(c.Prompts)].Prompt
				p = p[:1+(i*5)%len(p)]
				for _, sl := range []*int{&batch[i], &alone[i]} {
					var err error
					if *sl, err = s.Acquire(); err != nil {
						t.Fatal(err)
					}
					if _, err := s.Prefill(*sl, p, nil); err != nil {
						t.Fatal(err)
					}
				}
				toks[i] = int32((i*31 + 7) % vocab)
			}
			for step := range 2 {
				got, err := s.Decode(batch, toks, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := range k {
					want, err := s.Decode(alone[i:i+1], toks[i:i+1], nil)
					if err != nil {
						t.Fatal(err)
					}
					if d := firstDiff(got[i*vocab:(i+1)*vocab], want); d >= 0 {
						t.Errorf("step %d, row %d of %d: logit %d is %v batched, %v alone", step, i, k, d, got[i*vocab+d], want[d])
					}
				}
			}
		})
	}
}

// firstDiff returns the first index where a and b differ in their bits,
// or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// request is one generation of the batching tests.
type request struct {
	prompt []int32
	o      model.GenerateOptions
}

// generateAlone runs each request alone through Session.Generate.
func generateAlone(t *testing.T, m *model.Model, reqs []request) [][]int32 {
	t.Helper()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	out := make([][]int32, len(reqs))
	for i, r := range reqs {
		for tok, err := range s.Generate(context.Background(), r.prompt, r.o) {
			if err != nil {
				t.Fatalf("request %d alone: %v", i, err)
			}
			out[i] = append(out[i], tok)
		}
	}
	return out
}

// generateTogether runs the requests from a goroutine each, request i
// arriving i*stagger after the first, and returns their tokens.
func generateTogether(t *testing.T, b *model.Batcher, reqs []request, stagger time.Duration) [][]int32 {
	t.Helper()
	out, errs := make([][]int32, len(reqs)), make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * stagger)
			for tok, err := range b.Generate(context.Background(), r.prompt, r.o) {
				if err != nil {
					errs[i] = err
					return
				}
				out[i] = append(out[i], tok)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// mixedRequests makes n requests of the case's prompts cut to various
// lengths, with various budgets, greedy or sampled with a seed each.
func mixedRequests(prompts []golden.ModelPrompt, n int, sampled bool) []request {
	reqs := make([]request, n)
	for i := range reqs {
		p := prompts[i%len(prompts)].Prompt
		reqs[i].prompt = p[:1+(i*7)%len(p)]
		reqs[i].o = model.GenerateOptions{MaxTokens: 3 + i%5, IgnoreEOS: true}
		if sampled {
			reqs[i].o.Sampling = model.Sampling{Temperature: 1.5, TopK: 20, TopP: 0.9, Seed: uint64(100 + i)}
		}
	}
	return reqs
}

// TestBatcherMatchesAlone runs requests of mixed prompt lengths and
// budgets from concurrent goroutines, arriving at staggered times, more
// of them than the batch holds (the rest queue), and checks each one's
// tokens are those of the same request run alone: greedy and sampled.
func TestBatcherMatchesAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"qwen3_dense_bf16", 10}, {"qwen35_dense_bf16", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := loadCase(t, tc.name, model.Options{MaxLen: 48, Chunk: 8, InFlight: 2})
			b, err := m.NewBatcher(model.BatchOptions{MaxBatch: 4, Queue: tc.n})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			for _, sampled := range []bool{false, true} {
				reqs := mixedRequests(c.Prompts, tc.n, sampled)
				want := generateAlone(t, m, reqs)
				got := generateTogether(t, b, reqs, 2*time.Millisecond)
				for i := range reqs {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("sampled %v, request %d (prompt of %d): batched %v, alone %v", sampled, i, len(reqs[i].prompt), got[i], want[i])
					}
				}
			}
			st := b.Stats()
			t.Logf("%+v", st)
			if st.Rows <= st.Steps || st.Running != 0 || st.Waiting != 0 {
				t.Errorf("stats after the requests: %+v", st)
			}
		})
	}
}

// TestBatcherPrefixReuse runs a two-turn chat, turn 2's prompt turn 1's
// with its answer and more after it, through a Batcher that keeps
// prefixes and one that does not, and checks the tokens are the same,
// that turn 2 started from turn 1's cached prefix (the last multiple of
// Chunk of turn 1's prompt), and a prompt with no cached prefix missed.
// The hybrid case copies conv and recurrent states as well.
func TestBatcherPrefixReuse(t *testing.T) {
	for _, name := range []string{"qwen3_dense_bf16", "qwen35_dense_bf16"} {
		t.Run(name, func(t *testing.T) {
			const chunk = 4
			m, c := loadCase(t, name, model.Options{MaxLen: 64, Chunk: chunk})
			var p1 []int32 // turn 1's prompt: a few chunks and a part
			for _, p := range c.Prompts {
				p1 = append(p1, p.Prompt...)
			}
			p1 = p1[:min(len(p1), 3*chunk+2)]
			turns := func(b *model.Batcher) [][]int32 {
				p := p1
				o := model.GenerateOptions{MaxTokens: 6, IgnoreEOS: true, Sampling: model.Sampling{Temperature: 2, Seed: 5}}
				one := generateTogether(t, b, []request{{p, o}}, 0)[0]
				// Another sequence through the same slot in between:
				// turn 2 finds none of turn 1's caches there.
				other := slices.Repeat([]int32{int32(len(one))}, len(p))
				generateTogether(t, b, []request{{other, o}}, 0)
				p2 := slices.Concat(p, one, c.Prompts[1].Prompt[:3])
				two := generateTogether(t, b, []request{{p2, o}}, 0)[0]
				// A branch right after the cached prefix: its first
				// token reads the copied caches at once.
				p3 := append(slices.Clone(p[:len(p)/chunk*chunk]), c.Prompts[1].Prompt[0])
				return [][]int32{one, two, generateTogether(t, b, []request{{p3, o}}, 0)[0]}
			}
			var want, got [][]int32
			for _, slots := range []int{0, 2} {
				b, err := m.NewBatcher(model.BatchOptions{MaxBatch: 2, PrefixSlots: slots})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				if slots == 0 {
					want = turns(b)
				} else {
					got = turns(b)
				}
				st := b.Stats()
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				if slots == 0 {
					continue
				}
				held := len(p1) / chunk * chunk
				if st.PrefixHits != 2 || st.PrefixMisses != 2 || st.PrefixTokens != 2*uint64(held) {
					t.Errorf("stats %+v: want 2 hits of %d tokens (turn 2, the branch), 2 misses (turn 1, the other)", st, held)
				}
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("request %d: %v with prefix reuse, %v without", i+1, got[i], want[i])
				}
			}
		})
	}
}

// TestBatcherLimits checks a Batcher's refusals and ends: a prompt past
// the cache (ErrTooLong), a bad token, ErrBusy once the batch and the
// queue are full, a cancelled request freeing its slot for the queued
// one, Close ending a request in flight with ErrClosed and refusing new
// ones, and, once all is released, the emulated objects (loadCase's
// check) and the goroutines back to their counts.
func TestBatcherLimits(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	t.Cleanup(func() {
		for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			t.Errorf("%d goroutines before the test, %d after", goroutines, n)
		}
	})
	m, c := loadCase(t, "qwen3_dense_bf16", model.Options{MaxLen: 64, Chunk: 8})
	b, err := m.NewBatcher(model.BatchOptions{MaxBatch: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	prompt := c.Prompts[0].Prompt[:4]
	first := func(ctx context.Context, p []int32, o model.GenerateOptions) error {
		for _, err := range b.Generate(ctx, p, o) {
			return err
		}
		return nil
	}
	bg := context.Background()
	if err := first(bg, make([]int32, 60), model.GenerateOptions{MaxTokens: 5}); !errors.Is(err, model.ErrTooLong) || !errors.Is(err, model.ErrInvalidArgument) {
		t.Errorf("60 prompt tokens and 5 more in 64: %v, want ErrTooLong", err)
	}
	if err := first(bg, []int32{1, 1 << 20}, model.GenerateOptions{}); !errors.Is(err, model.ErrInvalidArgument) {
		t.Errorf("a token outside the vocabulary: %v", err)
	}

	// A holds the one slot, B waits, C finds no room.
	actx, cancelA := context.WithCancel(bg)
	nextA, stopA := iter.Pull2(b.Generate(actx, prompt, model.GenerateOptions{IgnoreEOS: true}))
	defer stopA()
	if _, err, ok := nextA(); err != nil || !ok {
		t.Fatalf("A's first token: %v", err)
	}
	bDone := make(chan []int32)
	go func() {
		var got []int32
		for tok, err := range b.Generate(bg, prompt, model.GenerateOptions{MaxTokens: 3, IgnoreEOS: true}) {
			if err != nil {
				t.Errorf("B: %v", err)
			}
			got = append(got, tok)
		}
		bDone <- got
	}()
	for b.Stats().Waiting != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := first(bg, prompt, model.GenerateOptions{}); !errors.Is(err, model.ErrBusy) {
		t.Errorf("with the batch and the queue full: %v, want ErrBusy", err)
	}
	cancelA()
	if err := endOf(nextA); !errors.Is(err, context.Canceled) {
		t.Errorf("A cancelled: %v", err)
	}
	if got := <-bDone; len(got) != 3 {
		t.Errorf("B, queued behind A: %d tokens, want 3", len(got))
	}

	// D is in flight when the Batcher closes.
	nextD, stopD := iter.Pull2(b.Generate(bg, prompt, model.GenerateOptions{IgnoreEOS: true}))
	defer stopD()
	if _, err, _ := nextD(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := endOf(nextD); !errors.Is(err, model.ErrClosed) {
		t.Errorf("D at Close: %v, want ErrClosed", err)
	}
	if err := first(bg, prompt, model.GenerateOptions{}); !errors.Is(err, model.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if st := b.Stats(); st.Running != 0 || st.Waiting != 0 {
		t.Errorf("stats after Close: %+v", st)
	}
}

// endOf pulls a generation's tokens until its end and returns its error
// (nil when it ended without one).
func endOf(next func() (int32, error, bool)) error {
	for {
		_, err, ok := next()
		if !ok || err != nil {
			return err
		}
	}
}
