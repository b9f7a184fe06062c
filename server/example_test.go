package server_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/puremetal/puremetal/internal/tinymodel"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/server"
)

// A Server mounted on an http.Server (here httptest's, on loopback), and
// the official Go SDK of OpenAI talking to it. The model is the tiny
// checkpoint the command embeds (random weights: its text means nothing)
// on the GPU, or the emulated device off a Mac; model's Example shows how
// a checkpoint folder is loaded. (The README's serving snippet.)
func Example() {
	c, release, err := tinymodel.Open(256) // the embedded tiny checkpoint, as model's Example loads it
	if err != nil {
		log.Fatal(err)
	}
	defer release()
	m, tok, chat := c.Model, c.Tok, c.Chat // model.Load, tokenizer.Load, tokenizer.LoadChatTemplate

	gen, err := m.NewBatcher(model.BatchOptions{MaxBatch: 8, Queue: 16}) // continuous batching: up to 8 sequences decoded together, 16 waiting
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close()
	srv := httptest.NewServer(server.New(gen, tok, chat, server.Options{Model: "tiny", MaxLen: 256}))
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("unused"))
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:       "tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")},
		MaxTokens:   openai.Int(8),
		Temperature: openai.Float(0),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Choices[0].FinishReason, resp.Usage.CompletionTokens, "tokens")
	// Output: length 8 tokens
}
