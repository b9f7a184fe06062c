package tokenizer

import (
	"slices"
	"testing"
)

// TestSplitWords checks the words of both expressions on cases derived by
// hand from the expressions' alternatives (the first that matches wins,
// greedy, backtracking); encoding these texts also gives transformers.js's
// ids. The golden texts check Qwen2's expression against HF itself.
func TestSplitWords(t *testing.T) {
	qwen2, qwen35 := wordSplitter{}, wordSplitter{marksAreLetters: true}
	for _, c := range []struct {
		text        string
		qwen2       []string
		qwen35      []string // nil: as qwen2
		explanation string
	}{
		{"a   b", []string{"a", "  ", " b"}, nil, `\s+(?!\S) leaves the last space to the word`},
		{"x  ", []string{"x", "  "}, nil, `\s+(?!\S) at the end takes all`},
		{"x \n  y", []string{"x", " \n", " ", " y"}, nil, `\s*[\r\n]+ ends at the last line break`},
		{"a\r\n\r\nb", []string{"a", "\r\n\r\n", "b"}, nil, ""},
		{"it's 'S'", []string{"it", "'s", " '", "S", "'"}, nil, "contractions in any case, quotes otherwise"},
		{"'ſx 'LL", []string{"'ſ", "x", " '", "LL"}, nil, "ſ folds to s; 'LL is not at the start of a word here"},
		{"'LLama", []string{"'LL", "ama"}, nil, ""},
		{"12345", []string{"1", "2", "3", "4", "5"}, nil, `\p{N} is one digit`},
		{"x--->\n\ny", []string{"x", "--->\n\n", "y"}, nil, `[^\s\p{L}\p{N}]+[\r\n]*`},
		{"(hello)", []string{"(hello", ")"}, nil, "one character before the letters"},
		{"नमस्ते", []string{"नमस", "्त", "े"}, []string{"नमस्ते"}, "Devanagari's vowel signs and virama are marks"},
		{"e\u0301 x", []string{"e", "\u0301", " x"}, []string{"e\u0301", " x"}, "a combining accent"},
		{" \u0301a", []string{" \u0301", "a"}, []string{" \u0301a"}, "a mark after the optional character"},
		{"!\u0301a", []string{"!\u0301", "a"}, []string{"!\u0301a"}, ""},
		{"\u00a0\u2003x", []string{"\u00a0", "\u2003x"}, nil, "Unicode spaces are \\s, and the last one starts the word"},
	} {
		if c.qwen35 == nil {
			c.qwen35 = c.qwen2
		}
		if got := splitWords(qwen2, c.text); !slices.Equal(got, c.qwen2) {
			t.Errorf("Qwen2 %q: got %q, want %q (%s)", c.text, got, c.qwen2, c.explanation)
		}
		if got := splitWords(qwen35, c.text); !slices.Equal(got, c.qwen35) {
			t.Errorf("Qwen3.5 %q: got %q, want %q (%s)", c.text, got, c.qwen35, c.explanation)
		}
	}
}
