// Package tinymodel loads the embedded tiny checkpoint of model/tiny, with
// its tokenizer and chat template, for the tests and examples of the
// packages above package model.
package tinymodel

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tokenizer"
)

// A Checkpoint is the tiny model loaded.
type Checkpoint struct {
	Model  *model.Model
	Tok    *tokenizer.Tokenizer
	Chat   *tokenizer.ChatTemplate
	MaxLen int // the Model's Options.MaxLen
}

// load writes the checkpoint into dir and loads it on dev with caches of
// maxLen positions.
func load(dev *mtl.Device, dir string, maxLen int) (*Checkpoint, error) {
	if err := tiny.WriteDir(dir); err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	chat, err := tokenizer.LoadChatTemplate(dir)
	if err != nil {
		return nil, err
	}
	m, err := model.Load(dev, dir, model.Options{MaxLen: maxLen})
	if err != nil {
		return nil, err
	}
	return &Checkpoint{Model: m, Tok: tok, Chat: chat, MaxLen: maxLen}, nil
}

// Load loads the checkpoint with caches of maxLen positions on an
// emulated device, released when the test ends; the test skips (fails in
// strict mode) where the emulated device does not open.
func Load(t testing.TB, maxLen int) *Checkpoint {
	t.Helper()
	c, err := load(testdevice.Emulated(t, emu.Options{}), t.TempDir(), maxLen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Model.Release)
	return c
}

// Open loads the checkpoint with caches of maxLen positions on the
// system's Metal device, or else an emulated one, for an example; close
// releases it all.
func Open(maxLen int) (c *Checkpoint, close func(), err error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice()
	}
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "tiny")
	if err == nil {
		c, err = load(dev, dir, maxLen)
	}
	if err != nil {
		os.RemoveAll(dir)
		dev.Release()
		return nil, nil, err
	}
	return c, func() { c.Model.Release(); os.RemoveAll(dir); dev.Release() }, nil
}

// Session returns a new session of the model, released when the test
// ends.
func (c *Checkpoint) Session(t testing.TB) *model.Session {
	t.Helper()
	s, err := c.Model.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	return s
}

// Greedy generates greedily with s on prompt, at most maxTokens, and
// returns the tokenizer's decoding of the ids (special tokens skipped)
// and how many there were: the text a layer above the model must give
// for the same prompt.
func (c *Checkpoint) Greedy(t testing.TB, s *model.Session, prompt []int32, maxTokens int) (string, int) {
	t.Helper()
	var ids []int32
	for id, err := range s.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: maxTokens}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	text, err := c.Tok.Decode(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	return text, len(ids)
}
