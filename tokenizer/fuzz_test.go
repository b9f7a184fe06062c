package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzEncodeDecode: any input encodes without a panic, and its ids decode
// (at once, and id by id with a Decoder) to the input's normal form: each
// invalid UTF-8 byte replaced by U+FFFD, then NFC applied to each stretch
// between added tokens (the added tokens are cut out before normalizing,
// so a combining mark after one does not combine with its last
// character).
func FuzzEncodeDecode(f *testing.F) {
	for _, c := range golden(f).Encode {
		f.Add(c.Text)
	}
	for _, s := range []string{
		"\xff", "a\xc3", "\xe4\xbd", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80", "x\x00y",
		"'S 'ſ 'LL 'Re", "<|im_end|>\u0338", "e\u0301<|endoftext|>\u0301", "<|im_start|", "  \t\n\r\n  x",
		"\u00a0\u2003\u3000\u0085", "1234567890١٢٣", "😀\U0010FFFF", "<tool_call></tool_call>",
	} {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		want := normalForm(tok, s)
		got, err := tok.Decode(ids, false)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Encode(%q) = %v decodes to %q, want %q", s, ids, got, want)
		}
		if streamed := streamDecode(t, tok, ids, false); streamed != want {
			t.Fatalf("Encode(%q) = %v streams to %q, want %q", s, ids, streamed, want)
		}
		// Qwen3.5's expression too cuts any valid text into words that
		// tile it.
		if valid := string([]rune(s)); valid != "" {
			words := splitWords(wordSplitter{marksAreLetters: true}, valid)
			if strings.Join(words, "") != valid || slices.Contains(words, "") {
				t.Fatalf("Qwen3.5's words of %q: %q", valid, words)
			}
		}
	})
}

// normalForm returns what encoding keeps of s.
func normalForm(tok *Tokenizer, s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	var out []byte
	for len(s) > 0 {
		start, end, _ := tok.findAdded(s)
		out = append(out, norm.NFC.String(s[:start])...)
		out = append(out, s[start:end]...)
		s = s[end:]
	}
	return string(out)
}

// FuzzDecode: any ids of the vocabulary decode to valid UTF-8, the same at
// once and id by id.
func FuzzDecode(f *testing.F) {
	for _, c := range golden(f).Decode {
		f.Add(idBytes(c.IDs))
	}
	f.Add([]byte{0xe4, 0, 0, 0})
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ids := make([]int32, len(raw)/3)
		for i := range ids {
			// 3 bytes an id, folded into the vocabulary.
			ids[i] = int32(uint32(raw[3*i])|uint32(raw[3*i+1])<<8|uint32(raw[3*i+2])<<16) % int32(tok.VocabSize())
		}
		for _, skip := range []bool{false, true} {
			text, err := tok.Decode(ids, skip)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(text) {
				t.Fatalf("Decode(%v) = %q is not valid UTF-8", ids, text)
			}
			if streamed := streamDecode(t, tok, ids, skip); streamed != text {
				t.Fatalf("ids %v stream to %q, decode to %q", ids, streamed, text)
			}
		}
	})
}

func idBytes(ids []int32) []byte {
	var b []byte
	for _, id := range ids {
		b = append(b, byte(id), byte(id>>8), byte(id>>16))
	}
	return b
}
