package model_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/model"
)

// pipelineCase is the golden case the pipelined decode is checked on:
// float32, so that every step's greedy token is decided far beyond the
// kernels' error (TestGolden), and the truth's path is the one greedy
// decoding must take.
const pipelineCase = "qwen3next_moe_f32"

func loadCase(t *testing.T, name string, opts model.Options) (*model.Model, golden.ModelCase) {
	t.Helper()
	c, err := golden.LoadModel(filepath.Join(golden.SetDir(t, golden.ModelsSubdir), name))
	if err != nil {
		t.Fatal(err)
	}
	testdevice.CheckReleased(t)
	dev := testdevice.Emulated(t, emu.Options{})
	m, err := model.Load(dev, c.Dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Release)
	return m, c
}

// loadSession loads the golden case name and makes a session of it, both
// released when the test ends.
func loadSession(t *testing.T, name string, opts model.Options) (*model.Session, golden.ModelCase) {
	t.Helper()
	m, c := loadCase(t, name, opts)
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	return s, c
}

// TestGenerateGreedy generates with the token fed on the device, steps
// kept in flight, and checks the tokens are the truth's greedy path, for
// 1 and 3 steps in flight.
func TestGenerateGreedy(t *testing.T) {
	for _, inFlight := range []int{1, 3} {
		t.Run(fmt.Sprintf("inflight=%d", inFlight), func(t *testing.T) { generateGreedy(t, inFlight) })
	}
}

func generateGreedy(t *testing.T, inFlight int) {
	{
		s, c := loadSession(t, pipelineCase, model.Options{MaxLen: 96, InFlight: inFlight})
		for pi, p := range c.Prompts[:2] {
			var got []int32
			for tok, err := range s.Generate(context.Background(), p.Prompt, model.GenerateOptions{MaxTokens: len(p.Tokens), IgnoreEOS: true}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, tok)
			}
			if !slices.Equal(got, p.Tokens) {
				t.Errorf("in flight %d, prompt %d: generated %v, the truth's path %v", inFlight, pi, got, p.Tokens)
			}
		}
	}
}

// TestGenerateStops checks the stop conditions: a caller's stop token
// ends the stream before it, a cancelled context ends it with the
// context's error, and breaking out frees the slot.
func TestGenerateStops(t *testing.T) {
	s, c := loadSession(t, pipelineCase, model.Options{MaxLen: 96})
	p := c.Prompts[0]
	var got []int32
	for tok, err := range s.Generate(context.Background(), p.Prompt, model.GenerateOptions{Stop: []int32{p.Tokens[3]}, IgnoreEOS: true, MaxTokens: 8}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tok)
	}
	if want := p.Tokens[:slices.Index(p.Tokens, p.Tokens[3])]; !slices.Equal(got, want) {
		t.Errorf("stop at %d: got %v, want %v", p.Tokens[3], got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for _, err := range s.Generate(ctx, p.Prompt, model.GenerateOptions{IgnoreEOS: true, MaxTokens: 8}) {
		if err != nil {
			last = err
			break
		}
		if n++; n == 2 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) || n != 2 {
		t.Errorf("cancelled after 2 tokens: %d tokens, error %v", n, last)
	}
	if _, err := s.Acquire(); err != nil {
		t.Errorf("the generations left their slot taken: %v", err)
	}
}

// TestGenerateSampled checks sampling on the device: top-k 1 at any
// temperature is the greedy path, and a seed gives the same tokens run
// after run (the draws are keyed by seed and step), another seed another
// path.
func TestGenerateSampled(t *testing.T) {
	s, c := loadSession(t, pipelineCase, model.Options{MaxLen: 96})
	p := c.Prompts[0]
	gen := func(sp model.Sampling) []int32 {
		var got []int32
		for tok, err := range s.Generate(context.Background(), p.Prompt, model.GenerateOptions{Sampling: sp, MaxTokens: len(p.Tokens), IgnoreEOS: true}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tok)
		}
		return got
	}
	if got := gen(model.Sampling{Temperature: 5, TopK: 1, Seed: 3}); !slices.Equal(got, p.Tokens) {
		t.Errorf("top-k 1: %v, the greedy path %v", got, p.Tokens)
	}
	a, b := gen(model.Sampling{Temperature: 5, Seed: 7}), gen(model.Sampling{Temperature: 5, Seed: 7})
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 twice: %v then %v", a, b)
	}
	if other := gen(model.Sampling{Temperature: 5, Seed: 8}); slices.Equal(a, other) {
		t.Errorf("seeds 7 and 8 drew the same %d tokens %v at temperature 5", len(a), a)
	}
}

// TestGenerateRepetitionPenalty checks HF's repetition penalty through
// Generate and a Batcher against the host's reading of the same logits:
// each step's logits (Session.Prefill, then Decode) penalized over the
// prompt's and the generated tokens with cpuref.Penalize32, the argmax
// taken, for a greedy path the penalty changes.
func TestGenerateRepetitionPenalty(t *testing.T) {
	const penalty, steps = 1.5, 10
	s, c := loadSession(t, "qwen3_dense_bf16", model.Options{MaxLen: 96})
	p := c.Prompts[0]
	vocab := s.Model().Config.VocabSize
	// The host's path: the device's logits, penalized on the host.
	seen := make([]bool, vocab)
	for _, id := range p.Prompt {
		seen[id] = true
	}
	slot, err := s.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	logits, err := s.Prefill(slot, p.Prompt, nil)
	var want []int32
	for len(want) < steps && err == nil {
		pen := cpuref.Penalize32(logits, seen, penalty)
		next := int32(slices.Index(pen, slices.Max(pen)))
		want, seen[next] = append(want, next), true
		logits, err = s.Decode([]int{slot}, []int32{next}, logits)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Free(slot); err != nil {
		t.Fatal(err)
	}
	n := min(steps, len(p.Tokens))
	if slices.Equal(want[:n], p.Tokens[:n]) {
		t.Fatalf("penalty %v leaves the greedy path %v as it is: the test would show nothing", penalty, want)
	}
	o := model.GenerateOptions{Sampling: model.Sampling{RepetitionPenalty: penalty}, MaxTokens: steps, IgnoreEOS: true}
	collect := func(seq func(func(int32, error) bool)) []int32 {
		var got []int32
		for tok, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, tok)
		}
		return got
	}
	if got := collect(s.Generate(context.Background(), p.Prompt, o)); !slices.Equal(got, want) {
		t.Errorf("Generate with repetition penalty %v: %v, the host's penalized path %v", penalty, got, want)
	}
	b, err := s.Model().NewBatcher(model.BatchOptions{MaxBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := collect(b.Generate(context.Background(), p.Prompt, o)); !slices.Equal(got, want) {
		t.Errorf("a Batcher with repetition penalty %v: %v, the host's penalized path %v", penalty, got, want)
	}
	bad := o
	bad.RepetitionPenalty = -1
	for _, err := range s.Generate(context.Background(), p.Prompt, bad) {
		if !errors.Is(err, model.ErrInvalidArgument) {
			t.Errorf("repetition penalty -1: %v, want ErrInvalidArgument", err)
		}
		break
	}
}
