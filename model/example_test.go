package model_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tokenizer"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testdevice.DeviceOpens)) }

// Text in, text out: a checkpoint folder's model on the GPU (the emulated
// device off a Mac), its tokenizer and chat template, and greedy decoding
// streamed token by token. The folder here is the tiny checkpoint the
// command embeds, whose weights are random: its text means nothing.
// (The README's model snippet.)
func Example_generate() {
	dir, err := os.MkdirTemp("", "tiny")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := tiny.WriteDir(dir); err != nil { // config.json, model.safetensors, tokenizer.json, ...
		log.Fatal(err)
	}

	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice() // Linux: the emulated device
	}
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	m, err := model.Load(dev, dir, model.Options{MaxLen: 256}) // weights mapped, not copied
	if err != nil {
		log.Fatal(err)
	}
	defer m.Release()
	s, err := m.NewSession() // the caches of one sequence
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release()

	tok, err := tokenizer.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	chat, err := tokenizer.LoadChatTemplate(dir)
	if err != nil {
		log.Fatal(err)
	}
	text, err := chat.Render([]tokenizer.Message{{Role: "user", Content: "Hello!"}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		log.Fatal(err)
	}
	prompt := tok.Encode(text)
	dec := tok.NewDecoder(true) // whole UTF-8 characters only, special tokens skipped
	var out []byte
	n := 0
	for id, err := range s.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: 8}) {
		if err != nil {
			log.Fatal(err)
		}
		if out, err = dec.Append(out, id); err != nil { // a streaming client would print each piece
			log.Fatal(err)
		}
		n++
	}
	out = dec.Flush(out)
	fmt.Println(n, "tokens, valid UTF-8:", utf8.Valid(out))
	// Output: 8 tokens, valid UTF-8: true
}
