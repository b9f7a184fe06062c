package tokenizer

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// goldenTexts returns the golden encode texts and their total size.
func goldenTexts(tb testing.TB) (texts []string, size int) {
	for _, c := range golden(tb).Encode {
		texts = append(texts, c.Text)
		size += len(c.Text)
	}
	return texts, size
}

// TestEncodeAllocs: once a text's words are cached, encoding it into a
// slice with room does not allocate; nor does streaming decoding into a
// buffer with room.
func TestEncodeAllocs(t *testing.T) {
	tok := qwen3(t)
	texts, _ := goldenTexts(t)
	text := norm.NFC.String(strings.Join(texts, "\n")) // text that is not NFC is normalized into a new string
	ids := tok.Encode(text)                            // fills the cache
	dst := make([]int32, 0, len(ids))
	if n := testing.AllocsPerRun(20, func() { dst = tok.AppendEncode(dst[:0], text) }); n != 0 {
		t.Errorf("encoding %d bytes of cached words: %v allocations, want 0", len(text), n)
	}
	d := tok.NewDecoder(false)
	out := make([]byte, 0, 2*len(text))
	for _, id := range ids { // grows the decoder's buffer to the longest token
		out, _ = d.Append(out, id)
	}
	out = d.Flush(out)
	if n := testing.AllocsPerRun(20, func() {
		out = out[:0]
		for _, id := range ids {
			out, _ = d.Append(out, id)
		}
		out = d.Flush(out)
	}); n != 0 {
		t.Errorf("streaming %d ids: %v allocations, want 0", len(ids), n)
	}
}

// BenchmarkEncode encodes each golden text once an iteration, its words
// cached (the steady state of a server).
func BenchmarkEncode(b *testing.B) {
	tok := qwen3(b)
	texts, size := goldenTexts(b)
	var dst []int32
	for _, s := range texts {
		dst = tok.AppendEncode(dst[:0], s)
	}
	b.SetBytes(int64(size))
	for b.Loop() {
		for _, s := range texts {
			dst = tok.AppendEncode(dst[:0], s)
		}
	}
}

// BenchmarkEncodeUncached is BenchmarkEncode with the word cache emptied
// before each iteration: every word merged from its bytes.
func BenchmarkEncodeUncached(b *testing.B) {
	tok := qwen3(b)
	texts, size := goldenTexts(b)
	var dst []int32
	b.SetBytes(int64(size))
	for b.Loop() {
		tok.cache.reset()
		for _, s := range texts {
			dst = tok.AppendEncode(dst[:0], s)
		}
	}
}

// BenchmarkDecode decodes each golden text's ids once an iteration; bytes
// are those of the decoded text.
func BenchmarkDecode(b *testing.B) {
	tok := qwen3(b)
	var ids [][]int32
	size := 0
	for _, c := range golden(b).Encode {
		ids = append(ids, c.IDs)
		size += len(c.Decoded)
	}
	var dst []byte
	b.SetBytes(int64(size))
	for b.Loop() {
		for _, seq := range ids {
			dst, _ = tok.AppendDecode(dst[:0], seq, false)
		}
	}
}
