// Package tiny embeds a tiny Qwen3 checkpoint of random weights (4
// layers, hidden size 128, bf16, tied embeddings, a 2,048-token byte-level
// BPE tokenizer cut from Qwen3's, Qwen3's chat template): the golden set's
// qwen3_dense_bf16 case, with its prompts and the float64 truth's greedy
// continuations. Its text is meaningless (the weights are random); it
// lets a binary check itself end to end with no download.
package tiny

import (
	"embed"
	"encoding/json"
	"os"
	"path/filepath"
)

//go:embed config.json model.safetensors tokenizer.json tokenizer_config.json golden.json
var files embed.FS

// Name is the golden case the checkpoint is.
const Name = "qwen3_dense_bf16"

// WriteDir writes the checkpoint folder (config.json, model.safetensors,
// the tokenizer's two files, golden.json) into dir.
func WriteDir(dir string) error {
	entries, err := files.ReadDir(".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Prompt is one of the golden prompts: its ids and the truth's greedy
// continuation.
type Prompt struct {
	Prompt []int32 `json:"prompt"`
	Tokens []int32 `json:"tokens"`
}

// Prompts returns the golden prompts.
func Prompts() ([]Prompt, error) {
	b, err := files.ReadFile("golden.json")
	if err != nil {
		return nil, err
	}
	var g struct {
		Prompts []Prompt `json:"prompts"`
	}
	err = json.Unmarshal(b, &g)
	return g.Prompts, err
}
