package textgen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"unicode/utf8"

	"github.com/puremetal/puremetal/internal/tinymodel"
	"github.com/puremetal/puremetal/textgen"
	"github.com/puremetal/puremetal/tokenizer"
)

var chatOpts = tokenizer.ChatOptions{AddGenerationPrompt: true}

// Text in, text out: a conversation through the chat template, greedy
// generation with a stop sequence, the text and why it ended. The model
// is the tiny checkpoint the command embeds (random weights: its text
// means nothing) on the GPU, or the emulated device off a Mac; model's
// Example shows how a checkpoint folder is loaded.
func Example() {
	const maxLen = 128
	c, release, err := tinymodel.Open(maxLen) // the embedded tiny checkpoint, as model's Example loads it
	if err != nil {
		log.Fatal(err)
	}
	defer release()
	m, tok, chat := c.Model, c.Tok, c.Chat // model.Load, tokenizer.Load, tokenizer.LoadChatTemplate
	s, err := m.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release()

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
