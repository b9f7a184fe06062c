package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a byte-level BPE tokenizer read from a tokenizer.json. It
// is safe for concurrent use.
type Tokenizer struct {
	tokens  []string // by id; "" where no token has the id
	known   []bool   // ids the vocabulary or an added token has
	special []bool   // added tokens marked special
	vocab   map[string]int32

	bytes    []byte   // every token's bytes, one after another
	bytesOff []uint32 // token id's bytes are bytes[bytesOff[id]:bytesOff[id+1]]

	byteID       [256]int32 // the byte-level token of each byte
	merges       map[uint64]merge
	ignoreMerges bool             // a word in the vocabulary is one token
	wordID       map[string]int32 // raw bytes to id, with ignoreMerges

	added        []addedToken // longest first
	addedFirst   [256]bool    // first bytes of added tokens
	normalizeNFC bool
	split        wordSplitter

	cache   wordCache
	scratch sync.Pool // *bpeScratch
}

type addedToken struct {
	content string
	id      int32
}

// VocabSize returns one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the string of token id as the vocabulary writes it
// (byte-level characters for the model's tokens, the content for added
// tokens), and whether the id has a token.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.tokens) || !t.known[id] {
		return "", false
	}
	return t.tokens[id], true
}

// ID returns the id of a token string as the vocabulary or the added
// tokens write it, such as "<|im_end|>".
func (t *Tokenizer) ID(token string) (int32, bool) {
	for _, a := range t.added {
		if a.content == token {
			return a.id, true
		}
	}
	id, ok := t.vocab[token]
	return id, ok
}

// IsSpecial reports whether id is an added token marked special, the
// tokens that decoding with skipSpecial leaves out.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.special) && t.special[id]
}

func (t *Tokenizer) tokenBytes(id int32) []byte {
	return t.bytes[t.bytesOff[id]:t.bytesOff[id+1]]
}

// Encode returns the ids of text, as HF's encode(text,
// add_special_tokens=False): added tokens in the text become their ids.
func (t *Tokenizer) Encode(text string) []int32 {
	return t.AppendEncode(nil, text)
}

// AppendEncode appends the ids of text to dst and returns the extended
// slice. Once the words of the text are in the tokenizer's cache and dst
// has room, it does not allocate.
func (t *Tokenizer) AppendEncode(dst []int32, text string) []int32 {
	if !utf8.ValidString(text) {
		text = string([]rune(text)) // each invalid byte becomes U+FFFD
	}
	for len(text) > 0 {
		start, end, id := t.findAdded(text)
		dst = t.appendText(dst, text[:start])
		if start == len(text) {
			break
		}
		dst = append(dst, id)
		text = text[end:]
	}
	return dst
}

// findAdded returns the leftmost added token in s, the longest there, as
// s[start:end] with its id; start is len(s) when there is none.
func (t *Tokenizer) findAdded(s string) (start, end int, id int32) {
	for i := 0; i < len(s); i++ {
		if !t.addedFirst[s[i]] {
			continue
		}
		for _, a := range t.added {
			if strings.HasPrefix(s[i:], a.content) {
				return i, i + len(a.content), a.id
			}
		}
	}
	return len(s), len(s), 0
}

// appendText appends the ids of text that holds no added token: normalized,
// split into words, each word merged.
func (t *Tokenizer) appendText(dst []int32, text string) []int32 {
	if len(text) == 0 {
		return dst
	}
	if t.normalizeNFC && norm.NFC.QuickSpanString(text) < len(text) && !norm.NFC.IsNormalString(text) {
		text = norm.NFC.String(text)
	}
	var s *bpeScratch
	for len(text) > 0 {
		n := t.split.splitWord(text)
		word := text[:n]
		text = text[n:]
		if ids, ok := t.cache.get(word); ok {
			dst = append(dst, ids...)
			continue
		}
		if s == nil {
			s, _ = t.scratch.Get().(*bpeScratch)
			if s == nil {
				s = new(bpeScratch)
			}
			defer t.scratch.Put(s)
		}
		start := len(dst)
		dst = t.bpe(dst, word, s)
		t.cache.put(word, dst[start:])
	}
	return dst
}
