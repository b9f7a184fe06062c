// Package tokentest loads the tokenizer reference set kept in the
// repository's testdata/tokenizer (its README.md says how it was made):
// Qwen3's tokenizer.json (stored gzip-compressed), its
// tokenizer_config.json, and HF's own encodings, decodings and chat
// renderings in golden.json; and it locates the tiny checkpoint's
// tokenizer.
package tokentest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
)

// Golden is golden.json: what HF tokenizers 0.23 and transformers 5.17
// give for Qwen3's tokenizer.
type Golden struct {
	// Encode: encode(text, add_special_tokens=False) and decode(ids).
	Encode []struct {
		Text    string  `json:"text"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"encode"`
	// Decode: decode(ids) and decode(ids, skip_special_tokens=True).
	Decode []struct {
		IDs             []int32 `json:"ids"`
		Text            string  `json:"text"`
		TextSkipSpecial string  `json:"text_skip_special"`
	} `json:"decode"`
	// Chat: apply_chat_template(messages, add_generation_prompt=True,
	// enable_thinking=EnableThinking), as text and as ids.
	Chat []struct {
		Messages       json.RawMessage `json:"messages"`
		EnableThinking bool            `json:"enable_thinking"`
		Text           string          `json:"text"`
		IDs            []int32         `json:"ids"`
	} `json:"chat"`
}

// Dir returns the folder of the reference set, testdata/tokenizer; its
// tokenizer_config.json makes it a model folder for chat templates.
func Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(testenv.DataDir(t), "tokenizer")
}

// TinyDir returns the folder of the tiny Qwen3 checkpoint, which holds a
// 2,048-token tokenizer.json and tokenizer_config.json cut from Qwen3's.
func TinyDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(testenv.DataDir(t), "golden", "hf-models", "qwen3_dense_bf16")
}

// LoadGolden reads golden.json, failing the test unless every kind of
// case is there.
func LoadGolden(t testing.TB) *Golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(t), "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g Golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("golden.json: %v", err)
	}
	if len(g.Encode) == 0 || len(g.Decode) == 0 || len(g.Chat) == 0 {
		t.Fatalf("golden.json has %d encode, %d decode, %d chat cases", len(g.Encode), len(g.Decode), len(g.Chat))
	}
	return &g
}

// TokenizerJSON returns Qwen3's tokenizer.json, uncompressed.
func TokenizerJSON(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir(t), "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("tokenizer.json.gz: %v", err)
	}
	out, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("tokenizer.json.gz: %v", err)
	}
	return out
}
