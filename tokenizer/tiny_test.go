package tokenizer

import (
	"encoding/json"
	"slices"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/puremetal/puremetal/internal/tokentest"
)

// The tiny checkpoint's tokenizer is cut from Qwen3's: the 256 byte
// tokens and the first 1,792 merges keep their ids (below 2048), the 26
// added tokens move from 151643-151668 to 2048-2073.
const (
	tinyVocab      = 2048
	qwen3AddedBase = 151643
)

func tiny(t *testing.T) *Tokenizer {
	t.Helper()
	tok, err := Load(tokentest.TinyDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTinyAddedTokens: every added token of the tiny tokenizer.json has
// its id both ways, its special flag, and is one token in text.
func TestTinyAddedTokens(t *testing.T) {
	tok := tiny(t)
	var f tokenizerJSON
	if err := json.Unmarshal(tinyJSON(t), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.AddedTokens) != 26 {
		t.Fatalf("%d added tokens, want 26", len(f.AddedTokens))
	}
	for _, a := range f.AddedTokens {
		if id, ok := tok.ID(a.Content); !ok || id != a.ID {
			t.Errorf("ID(%q) = %d, %v; want %d", a.Content, id, ok, a.ID)
		}
		if s, ok := tok.Token(a.ID); !ok || s != a.Content {
			t.Errorf("Token(%d) = %q, %v; want %q", a.ID, s, ok, a.Content)
		}
		if tok.IsSpecial(a.ID) != a.Special {
			t.Errorf("IsSpecial(%d) = %v; want %v", a.ID, !a.Special, a.Special)
		}
		if ids := tok.Encode("x" + a.Content + "x"); !slices.Equal(ids, []int32{tok.byteID['x'], a.ID, tok.byteID['x']}) {
			t.Errorf("Encode(x%sx) = %v", a.Content, ids)
		}
	}
	if tok.VocabSize() != 2074 {
		t.Errorf("VocabSize = %d, want 2074", tok.VocabSize())
	}
}

// TestTinyGolden checks the tiny tokenizer on every golden text: its ids
// decode back to the text's NFC form, and they are HF's where that can be
// derived. The tiny tokenizer holds Qwen3's first merges under Qwen3's
// ids, so a word that HF's Qwen3 encoding gives only tokens below 2048 was
// merged by those merges alone, in the same order, and must get the same
// ids from the tiny one; added tokens must get Qwen3's id moved to 2048+.
func TestTinyGolden(t *testing.T) {
	tok, q := tiny(t), qwen3(t)
	derived, words := 0, 0
	for i, c := range golden(t).Encode {
		ids := tok.Encode(c.Text)
		text, err := tok.Decode(ids, false)
		if err != nil || text != norm.NFC.String(c.Text) {
			t.Errorf("case %d: decode(encode(%.40q)) = %.40q, %v", i, c.Text, text, err)
		}
		// Walk the text word by word beside HF's Qwen3 ids.
		hf := c.IDs
		s := c.Text
		for len(s) > 0 {
			start, end, id := tok.findAdded(s)
			for _, word := range splitWords(tok.split, norm.NFC.String(s[:start])) {
				n, size := 0, 0
				for size < len(word) {
					size += len(q.tokenBytes(hf[n]))
					n++
				}
				words++
				if slices.ContainsFunc(hf[:n], func(id int32) bool { return id >= tinyVocab }) {
					hf = hf[n:]
					continue
				}
				derived++
				if got := tok.bpe(nil, word, new(bpeScratch)); !slices.Equal(got, hf[:n]) {
					t.Errorf("case %d, word %q: tiny ids %v, HF's Qwen3 ids %v", i, word, got, hf[:n])
				}
				hf = hf[n:]
			}
			if start == len(s) {
				break
			}
			if want := hf[0] - qwen3AddedBase + tinyVocab; id != want {
				t.Errorf("case %d: added token %q has id %d, want %d", i, s[start:end], id, want)
			}
			hf = hf[1:]
			s = s[end:]
		}
	}
	t.Logf("%d of %d words checked against HF's ids", derived, words)
	if derived < words/2 {
		t.Errorf("only %d of %d words could be checked", derived, words)
	}
}

// splitWords splits text (no added tokens, normalized) as encoding with
// w does.
func splitWords(w wordSplitter, text string) []string {
	var words []string
	for len(text) > 0 {
		n := w.splitWord(text)
		words = append(words, text[:n])
		text = text[n:]
	}
	return words
}
