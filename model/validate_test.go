package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/puremetal/puremetal/model"
)

// TestRefusals checks that bad input is an error matching
// ErrInvalidArgument that says what was wrong, never a panic, and that a
// refused call leaves the sequence as it was.
func TestRefusals(t *testing.T) {
	s, c := loadSession(t, "qwen3_dense_bf16", model.Options{Slots: 2, MaxLen: 16})
	m := s.Model()
	slot, _ := s.Acquire()
	vocab := m.Config.VocabSize
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"token past the vocabulary", func() error { _, err := s.Prefill(slot, []int32{1, int32(vocab)}, nil); return err }},
		{"negative token", func() error { _, err := s.Decode([]int{slot}, []int32{-1}, nil); return err }},
		{"empty prompt", func() error { _, err := s.Prefill(slot, nil, nil); return err }},
		{"slot not acquired", func() error { _, err := s.Prefill(1, []int32{1}, nil); return err }},
		{"slot out of range", func() error { _, err := s.Decode([]int{7}, []int32{1}, nil); return err }},
		{"slot twice", func() error { _, err := s.Decode([]int{slot, slot}, []int32{1, 2}, nil); return err }},
		{"slots and tokens apart", func() error { _, err := s.Decode([]int{slot}, []int32{1, 2}, nil); return err }},
		{"past MaxLen", func() error { _, err := s.Prefill(slot, make([]int32, 17), nil); return err }},
		{"options", func() error { _, err := model.New(m.Device(), nil, model.Options{Slots: -1}); return err }},
	} {
		err := tc.call()
		if !errors.Is(err, model.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
		}
		if s.Len(slot) != 0 {
			t.Fatalf("%s: the slot holds %d positions after a refusal", tc.name, s.Len(slot))
		}
	}
	for _, err := range s.Generate(context.Background(), []int32{int32(vocab) + 5}, model.GenerateOptions{}) {
		if !errors.Is(err, model.ErrInvalidArgument) {
			t.Errorf("Generate of a token past the vocabulary: %v", err)
		}
	}
	if _, err := s.Prefill(slot, c.Prompts[0].Prompt, nil); err != nil {
		t.Errorf("a good prompt after the refusals: %v", err)
	}
}

// TestWeightsInPlace checks that a checkpoint whose tensors the kernels
// take as stored is viewed in place: qwen3_dense_bf16 copies only the
// rotary frequencies it computes (rotary_dim / 2 float32s), not a byte of
// weights.
func TestWeightsInPlace(t *testing.T) {
	m, _ := loadCase(t, "qwen3_dense_bf16", model.Options{})
	if want := int64(m.Config.RotaryDim() / 2 * 4); m.CopiedBytes != want {
		t.Errorf("%d bytes copied, want %d (the rotary frequencies alone)", m.CopiedBytes, want)
	}
	if m.MappedBytes() < 2<<20 {
		t.Errorf("%d bytes mapped, less than the 2 MiB checkpoint", m.MappedBytes())
	}
}
