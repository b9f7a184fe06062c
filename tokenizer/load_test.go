package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/tokentest"
)

// TestParseRefuses changes one setting of the tiny tokenizer.json at a
// time: each that this package does not implement is refused with the
// sentinel and an error naming the field.
func TestParseRefuses(t *testing.T) {
	base := tinyJSON(t)
	if _, err := Parse(base); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  []string // where in the JSON to set value
		value any
		want  error
		field string // what the error must name
	}{
		{[]string{"truncation"}, map[string]any{"max_length": 8}, ErrUnsupported, "truncation"},
		{[]string{"padding"}, map[string]any{"pad_id": 0}, ErrUnsupported, "padding"},
		{[]string{"model", "type"}, "WordPiece", ErrUnsupported, "model.type"},
		{[]string{"model", "dropout"}, 0.1, ErrUnsupported, "model.dropout"},
		{[]string{"model", "byte_fallback"}, true, ErrUnsupported, "model.byte_fallback"},
		{[]string{"model", "continuing_subword_prefix"}, "##", ErrUnsupported, "model.continuing_subword_prefix"},
		{[]string{"model", "end_of_word_suffix"}, "</w>", ErrUnsupported, "model.end_of_word_suffix"},
		{[]string{"normalizer"}, map[string]any{"type": "NFKC"}, ErrUnsupported, "normalizer.type"},
		{[]string{"normalizer"}, map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Lowercase"}}}, ErrUnsupported, "normalizer.normalizers[0].type"},
		{[]string{"pre_tokenizer"}, nil, ErrUnsupported, "pre_tokenizer"},
		{[]string{"pre_tokenizer"}, map[string]any{"type": "ByteLevel", "use_regex": true}, ErrUnsupported, "pre_tokenizer.type"},
		{[]string{"pre_tokenizer", "pretokenizers", "0", "pattern"}, map[string]any{"Regex": `\p{N}{1,3}`}, ErrUnsupported, "pre_tokenizer.pretokenizers[0].pattern.Regex"},
		{[]string{"pre_tokenizer", "pretokenizers", "0", "behavior"}, "Removed", ErrUnsupported, "pre_tokenizer.pretokenizers[0].behavior"},
		{[]string{"pre_tokenizer", "pretokenizers", "0", "invert"}, true, ErrUnsupported, "pre_tokenizer.pretokenizers[0].invert"},
		{[]string{"pre_tokenizer", "pretokenizers", "1", "add_prefix_space"}, true, ErrUnsupported, "pre_tokenizer.pretokenizers[1].add_prefix_space"},
		{[]string{"pre_tokenizer", "pretokenizers", "1", "use_regex"}, true, ErrUnsupported, "pre_tokenizer.pretokenizers[1].use_regex"},
		{[]string{"post_processor"}, map[string]any{"type": "TemplateProcessing"}, ErrUnsupported, "post_processor.type"},
		{[]string{"decoder"}, nil, ErrUnsupported, "decoder.type"},
		{[]string{"decoder"}, map[string]any{"type": "WordPiece"}, ErrUnsupported, "decoder.type"},
		{[]string{"added_tokens", "0", "lstrip"}, true, ErrUnsupported, `added_tokens[0] ("<|endoftext|>").lstrip`},
		{[]string{"added_tokens", "1", "rstrip"}, true, ErrUnsupported, `added_tokens[1] ("<|im_start|>").rstrip`},
		{[]string{"added_tokens", "2", "single_word"}, true, ErrUnsupported, `added_tokens[2] ("<|im_end|>").single_word`},
		{[]string{"added_tokens", "3", "normalized"}, true, ErrUnsupported, `added_tokens[3] ("<|object_ref_start|>").normalized`},
		{[]string{"added_tokens", "3", "content"}, "", ErrFormat, "added_tokens[3]"},
		{[]string{"model", "merges", "0"}, []string{"Ġ", "nope"}, ErrFormat, "model.merges[0]"},
		{[]string{"model", "merges"}, 7, ErrFormat, "model.merges"},
		{[]string{"model", "vocab", "!"}, nil, ErrFormat, "byte 0x21"},
		{[]string{"model", "vocab", "!"}, -1, ErrFormat, "negative"},
		{nil, "not an object", ErrFormat, "tokenizer.json"},
	} {
		data := edit(t, base, c.path, c.value)
		_, err := Parse(data)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s = %v: got %v, want %v naming %s", strings.Join(c.path, "."), c.value, err, c.want, c.field)
		}
	}
}

func mustParse(t *testing.T, data []byte) *Tokenizer {
	t.Helper()
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tinyJSON returns the tiny checkpoint's tokenizer.json.
func tinyJSON(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tokentest.TinyDir(t), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// edit returns the JSON data with the value at path set (deleted for a
// nil value in an object); an empty path replaces the whole.
func edit(t *testing.T, data []byte, path []string, value any) []byte {
	t.Helper()
	if len(path) == 0 {
		out, _ := json.Marshal(value)
		return out
	}
	var root any
	if err := json.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	node := root
	for i, key := range path {
		last := i == len(path)-1
		switch n := node.(type) {
		case map[string]any:
			if last {
				if value == nil {
					delete(n, key)
				} else {
					n[key] = value
				}
			}
			node = n[key]
		case []any:
			var k int
			if err := json.Unmarshal([]byte(key), &k); err != nil {
				t.Fatal(err)
			}
			if last {
				n[k] = value
			}
			node = n[k]
		}
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMergesAsStrings: the older "a b" form of merges gives the same
// tokenizer.
func TestMergesAsStrings(t *testing.T) {
	base := tinyJSON(t)
	var f struct {
		Model struct{ Merges [][2]string } `json:"model"`
	}
	if err := json.Unmarshal(base, &f); err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(f.Model.Merges))
	for i, m := range f.Model.Merges {
		lines[i] = m[0] + " " + m[1]
	}
	a := mustParse(t, base)
	b := mustParse(t, edit(t, base, []string{"model", "merges"}, lines))
	text := "The quick brown fox's 12 jumps, over   the lazy dog.\n"
	if ga, gb := a.Encode(text), b.Encode(text); len(ga) == 0 || !slices.Equal(ga, gb) {
		t.Errorf("pairs give %v, strings give %v", ga, gb)
	}
	if _, err := Parse(edit(t, base, []string{"model", "merges", "0"}, "a b c")); !errors.Is(err, ErrFormat) {
		t.Errorf("a merge of three tokens: got %v, want ErrFormat", err)
	}
}

// TestIgnoreMerges: with model.ignore_merges a word that is itself in the
// vocabulary is that one token, merges or not; without, it is merged.
func TestIgnoreMerges(t *testing.T) {
	base := tinyJSON(t)
	const word, id = " xyzzy", 2074 // 'Ġxyzzy' has no merge path in the tiny vocabulary
	withWord := edit(t, base, []string{"model", "vocab", "Ġxyzzy"}, id)
	plain := mustParse(t, withWord)
	ignoring := mustParse(t, edit(t, withWord, []string{"model", "ignore_merges"}, true))
	if got := ignoring.Encode(word + word); !slices.Equal(got, []int32{id, id}) {
		t.Errorf("ignore_merges: %q gives %v, want [%d %d]", word+word, got, id, id)
	}
	if got := plain.Encode(word); len(got) < 2 || slices.Contains(got, id) {
		t.Errorf("merges: %q gives %v, want its merged pieces", word, got)
	}
	if a, b := plain.Encode("other words"), ignoring.Encode("other words"); !slices.Equal(a, b) {
		t.Errorf("words outside the vocabulary: %v with merges, %v ignoring them", a, b)
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := tiny(t)
	for _, id := range []int32{-1, 2074, 1 << 30} {
		if _, err := tok.Decode([]int32{1, id}, false); !errors.Is(err, ErrTokenID) {
			t.Errorf("Decode(%d): got %v, want ErrTokenID", id, err)
		}
		if _, err := tok.NewDecoder(false).Append(nil, id); !errors.Is(err, ErrTokenID) {
			t.Errorf("Decoder.Append(%d): got %v, want ErrTokenID", id, err)
		}
	}
}

// TestQwen35Pattern: Qwen3.5's expression loads, with marks as letters.
func TestQwen35Pattern(t *testing.T) {
	base := tinyJSON(t)
	tok := mustParse(t, edit(t, base, []string{"pre_tokenizer", "pretokenizers", "0", "pattern"}, map[string]any{"Regex": qwen35Pattern}))
	if !tok.split.marksAreLetters || mustParse(t, base).split.marksAreLetters {
		t.Errorf("marksAreLetters is %v with Qwen3.5's expression, %v with Qwen2's", tok.split.marksAreLetters, !tok.split.marksAreLetters)
	}
	const text = "नमस्ते e\u0301"
	if got, err := tok.Decode(tok.Encode(text), false); err != nil || got != "नमस्ते é" {
		t.Errorf("%q decodes back to %q, %v", text, got, err)
	}
}
