package textgen_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"unicode/utf8"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/textgen"
	"github.com/puremetal/puremetal/tokenizer"
)

var chatOpts = tokenizer.ChatOptions{AddGenerationPrompt: true}

// Text in, text out: a conversation through the chat template, greedy
// generation with a stop sequence, the text and why it ended. The model
// is the tiny checkpoint the command embeds (random weights: its text
// means nothing) on the emulated device off a Mac.
func Example() {
	dir, err := os.MkdirTemp("", "tiny")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := tiny.WriteDir(dir); err != nil {
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
	const maxLen = 128
	m, err := model.Load(dev, dir, model.Options{MaxLen: maxLen})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Release()
	s, err := m.NewSession()
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

	p := textgen.New(s, tok, chat, maxLen)
	prompt, err := p.EncodeChat(json.RawMessage(`[{"role":"user","content":"Hello!"}]`), tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		log.Fatal(err)
	}
	text, res, err := p.Complete(context.Background(), prompt, textgen.Options{MaxTokens: 8, Stop: []string{"\n\n"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("valid UTF-8:", utf8.ValidString(text))
	fmt.Println("finish:", res.FinishReason, "completion tokens:", res.Usage.CompletionTokens)
	// Output:
	// valid UTF-8: true
	// finish: length completion tokens: 8
}
