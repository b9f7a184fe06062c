// Package tinymodel loads the embedded tiny checkpoint of model/tiny on
// the emulated device, with its tokenizer and chat template, for the tests
// of the packages above package model.
package tinymodel

import (
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/tokenizer"
)

// A Checkpoint is the tiny model loaded, released when the test ends.
type Checkpoint struct {
	Model  *model.Model
	Tok    *tokenizer.Tokenizer
	Chat   *tokenizer.ChatTemplate
	MaxLen int // the Model's Options.MaxLen
}

// Load loads the tiny checkpoint with caches of maxLen positions on an
// emulated device; the test skips (fails in strict mode) where the
// emulated device does not open.
func Load(t testing.TB, maxLen int) *Checkpoint {
	t.Helper()
	dev := testdevice.Emulated(t, emu.Options{})
	dir := t.TempDir()
	if err := tiny.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dev, dir, model.Options{MaxLen: maxLen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Release)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := tokenizer.LoadChatTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Checkpoint{Model: m, Tok: tok, Chat: chat, MaxLen: maxLen}
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
