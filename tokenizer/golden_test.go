package tokenizer

import (
	"slices"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/puremetal/puremetal/internal/tokentest"
)

var (
	qwen3Once sync.Once
	qwen3Tok  *Tokenizer
	qwen3Err  error
)

// qwen3 returns Qwen3's tokenizer, read once for all tests.
func qwen3(tb testing.TB) *Tokenizer {
	tb.Helper()
	qwen3Once.Do(func() { qwen3Tok, qwen3Err = Parse(tokentest.TokenizerJSON(tb)) })
	if qwen3Err != nil {
		tb.Fatal(qwen3Err)
	}
	if qwen3Tok == nil {
		tb.Fatal("Qwen3's tokenizer could not be read")
	}
	return qwen3Tok
}

func golden(tb testing.TB) *tokentest.Golden { return tokentest.LoadGolden(tb) }

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

// TestEncodeConcurrent encodes the golden texts from several goroutines at
// once with an emptied word cache, so that they fill and read it together.
func TestEncodeConcurrent(t *testing.T) {
	tok := qwen3(t)
	tok.cache.reset()
	cases := golden(t).Encode
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(cases))
	for g := range 4 {
		wg.Go(func() {
			for i := range cases {
				c := cases[(i+g*len(cases)/4)%len(cases)]
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					errs <- c.Text
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for text := range errs {
		t.Errorf("concurrent encode of %.40q differs from HF's", text)
	}
}
