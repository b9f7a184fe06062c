package tokenizer_test

import (
	"fmt"
	"log"
	"path/filepath"

	"github.com/puremetal/puremetal/tokenizer"
)

// A model folder with a tokenizer.json and a tokenizer_config.json: the
// tiny Qwen3 checkpoint's, 2,048 tokens cut from Qwen3's.
var model = filepath.Join("..", "testdata", "golden", "hf-models", "qwen3_dense_bf16")

func ExampleTokenizer_Encode() {
	tok, err := tokenizer.Load(model)
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Hello, world!<|im_end|>")
	fmt.Println(ids)
	text, err := tok.Decode(ids, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// [39 301 385 11 1879 0 2050]
	// "Hello, world!"
}

func ExampleDecoder() {
	tok, err := tokenizer.Load(model)
	if err != nil {
		log.Fatal(err)
	}
	// "€" is three bytes, E2 82 AC, here three byte tokens.
	ids := tok.Encode("€!")
	d := tok.NewDecoder(false)
	var out []byte
	for _, id := range ids {
		out, err = d.Append(out[:0], id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d -> %q\n", id, out)
	}
	fmt.Printf("end -> %q\n", d.Flush(out[:0]))
	// Output:
	// 158 -> ""
	// 224 -> ""
	// 105 -> "€"
	// 0 -> "!"
	// end -> ""
}

func ExampleChatTemplate_Render() {
	chat, err := tokenizer.LoadChatTemplate(model)
	if err != nil {
		log.Fatal(err)
	}
	prompt, err := chat.Render([]tokenizer.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "2+2?"},
	}, tokenizer.ChatOptions{AddGenerationPrompt: true, DisableThinking: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(prompt)
	// Output:
	// <|im_start|>system
	// You are terse.<|im_end|>
	// <|im_start|>user
	// 2+2?<|im_end|>
	// <|im_start|>assistant
	// <think>
	//
	// </think>
}
