package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The reference set: Qwen3's tokenizer (gzip -9 of the published
// tokenizer.json) and HF's own encodings, decodings and chat renderings of
// it (README.md there says how they were made).
var testdataDir = filepath.Join("..", "testdata", "tokenizer")

type goldenSet struct {
	Encode []struct {
		Text    string  `json:"text"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"encode"`
	Decode []struct {
		IDs             []int32 `json:"ids"`
		Text            string  `json:"text"`
		TextSkipSpecial string  `json:"text_skip_special"`
	} `json:"decode"`
	Chat []struct {
		Messages       json.RawMessage `json:"messages"`
		EnableThinking bool            `json:"enable_thinking"`
		Text           string          `json:"text"`
		IDs            []int32         `json:"ids"`
	} `json:"chat"`
}

var (
	qwen3Once sync.Once
	qwen3Tok  *Tokenizer
	qwen3Err  error
)

// qwen3 returns Qwen3's tokenizer, read once for all tests.
func qwen3(tb testing.TB) *Tokenizer {
	tb.Helper()
	qwen3Once.Do(func() {
		f, err := os.Open(filepath.Join(testdataDir, "tokenizer.json.gz"))
		if err != nil {
			qwen3Err = err
			return
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			qwen3Err = err
			return
		}
		qwen3Tok, qwen3Err = Read(z)
	})
	if qwen3Err != nil {
		tb.Fatal(qwen3Err)
	}
	return qwen3Tok
}

func golden(tb testing.TB) *goldenSet {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, "golden.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var g goldenSet
	if err := json.Unmarshal(data, &g); err != nil {
		tb.Fatal(err)
	}
	if len(g.Encode) == 0 || len(g.Decode) == 0 || len(g.Chat) == 0 {
		tb.Fatalf("golden.json has %d encode, %d decode, %d chat cases", len(g.Encode), len(g.Decode), len(g.Chat))
	}
	return &g
}

func TestGoldenEncode(t *testing.T) {
	tok := qwen3(t)
	for i, c := range golden(t).Encode {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("encode case %d %.40q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
			continue
		}
		text, err := tok.Decode(got, false)
		if err != nil || text != c.Decoded {
			t.Errorf("decode of encode case %d: got %q, %v; want %q", i, text, err, c.Decoded)
		}
		if text != norm.NFC.String(c.Text) {
			t.Errorf("encode case %d does not decode to its NFC form", i)
		}
	}
}

func TestGoldenDecode(t *testing.T) {
	tok := qwen3(t)
	for i, c := range golden(t).Decode {
		for _, skip := range []bool{false, true} {
			want := c.Text
			if skip {
				want = c.TextSkipSpecial
			}
			got, err := tok.Decode(c.IDs, skip)
			if err != nil || got != want {
				t.Errorf("decode case %d (skip special %v): got %q, %v; want %q", i, skip, got, err, want)
			}
			if got := streamDecode(t, tok, c.IDs, skip); got != want {
				t.Errorf("streaming decode case %d (skip special %v): got %q; want %q", i, skip, got, want)
			}
		}
	}
}

// streamDecode decodes ids one at a time with a Decoder, checking that
// each step gives out only valid UTF-8.
func streamDecode(tb testing.TB, tok *Tokenizer, ids []int32, skip bool) string {
	tb.Helper()
	d := tok.NewDecoder(skip)
	var out []byte
	for _, id := range ids {
		n := len(out)
		var err error
		if out, err = d.Append(out, id); err != nil {
			tb.Fatal(err)
		}
		if !utf8.Valid(out[n:]) {
			tb.Fatalf("Decoder gave out invalid UTF-8 %q for id %d", out[n:], id)
		}
	}
	return string(d.Flush(out))
}
