package server_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/server"
	"github.com/puremetal/puremetal/tokenizer"
)

// A Server mounted on an http.Server (here httptest's, on loopback), and
// the official Go SDK of OpenAI talking to it. The model is the tiny
// checkpoint the command embeds (random weights: its text means nothing)
// on the emulated device off a Mac. (The README's serving snippet.)
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
	tok, err := tokenizer.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	chat, err := tokenizer.LoadChatTemplate(dir)
	if err != nil {
		log.Fatal(err)
	}

	m, err := model.Load(dev, dir, model.Options{MaxLen: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Release()
	gen, err := server.NewSerial(m, 16) // one sequence at a time, up to 16 waiting
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
