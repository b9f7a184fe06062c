package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// tokenizerJSON is the part of HF's tokenizer.json that this package reads;
// the fields it does not implement are kept raw to be checked.
type tokenizerJSON struct {
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    *componentJSON   `json:"normalizer"`
	PreTokenizer  *componentJSON   `json:"pre_tokenizer"`
	PostProcessor *componentJSON   `json:"post_processor"`
	Decoder       *componentJSON   `json:"decoder"`
	Model         modelJSON        `json:"model"`
}

type addedTokenJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// componentJSON is a normalizer, pre-tokenizer, post-processor or decoder
// with the options any of the supported ones have.
type componentJSON struct {
	Type           string                          `json:"type"`
	Normalizers    []*componentJSON                `json:"normalizers"`
	Pretokenizers  []*componentJSON                `json:"pretokenizers"`
	Pattern        struct{ Regex, String *string } `json:"pattern"`
	Behavior       string                          `json:"behavior"`
	Invert         bool                            `json:"invert"`
	AddPrefixSpace bool                            `json:"add_prefix_space"`
	UseRegex       bool                            `json:"use_regex"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	ContinuingSubwordPrefix string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         string           `json:"end_of_word_suffix"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// Load reads dir/tokenizer.json.
func Load(dir string) (*Tokenizer, error) {
	return LoadFile(filepath.Join(dir, "tokenizer.json"))
}

// LoadFile reads a tokenizer.json file.
func LoadFile(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Read parses a tokenizer.json from r.
func Read(r io.Reader) (*Tokenizer, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse builds a tokenizer from the contents of a tokenizer.json. It
// refuses (with [ErrUnsupported], naming the field) every setting that
// would make HF's tokenization differ from this package's.
func Parse(data []byte) (*Tokenizer, error) {
	var f tokenizerJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrFormat, err)
	}
	split, err := f.check()
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{
		ignoreMerges: f.Model.IgnoreMerges,
		normalizeNFC: f.Normalizer != nil,
		split:        split,
	}
	if err := t.buildVocab(&f); err != nil {
		return nil, err
	}
	if err := t.buildMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	t.cache.reset()
	return t, nil
}

func unsupported(field string, value any) error {
	return fmt.Errorf("%w: %s = %v", ErrUnsupported, field, value)
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// check refuses what this package does not implement, and returns the
// splitter of the pre-tokenizer's expression.
func (f *tokenizerJSON) check() (wordSplitter, error) {
	if !isNull(f.Truncation) {
		return wordSplitter{}, unsupported("truncation", string(f.Truncation))
	}
	if !isNull(f.Padding) {
		return wordSplitter{}, unsupported("padding", string(f.Padding))
	}
	m := &f.Model
	switch {
	case m.Type != "BPE":
		return wordSplitter{}, unsupported("model.type", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return wordSplitter{}, unsupported("model.dropout", *m.Dropout)
	case m.ContinuingSubwordPrefix != "":
		return wordSplitter{}, unsupported("model.continuing_subword_prefix", m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != "":
		return wordSplitter{}, unsupported("model.end_of_word_suffix", m.EndOfWordSuffix)
	case m.ByteFallback:
		return wordSplitter{}, unsupported("model.byte_fallback", true)
	}
	for i, a := range f.AddedTokens {
		field := fmt.Sprintf("added_tokens[%d] (%q)", i, a.Content)
		switch {
		case a.SingleWord:
			return wordSplitter{}, unsupported(field+".single_word", true)
		case a.LStrip:
			return wordSplitter{}, unsupported(field+".lstrip", true)
		case a.RStrip:
			return wordSplitter{}, unsupported(field+".rstrip", true)
		case a.Normalized:
			return wordSplitter{}, unsupported(field+".normalized", true)
		case a.Content == "":
			return wordSplitter{}, fmt.Errorf("%w: %s has no content", ErrFormat, field)
		}
	}
	if err := checkNormalizer("normalizer", f.Normalizer); err != nil {
		return wordSplitter{}, err
	}
	split, err := checkPreTokenizer(f.PreTokenizer)
	if err != nil {
		return wordSplitter{}, err
	}
	if p := f.PostProcessor; p != nil && p.Type != "ByteLevel" {
		// ByteLevel's post-processing only trims offsets; any other
		// adds tokens or changes them.
		return wordSplitter{}, unsupported("post_processor.type", p.Type)
	}
	if d := f.Decoder; d == nil || d.Type != "ByteLevel" {
		typ := "null"
		if d != nil {
			typ = d.Type
		}
		return wordSplitter{}, unsupported("decoder.type", typ)
	}
	return split, nil
}

// checkNormalizer accepts no normalizer, NFC, or a sequence of only NFC.
func checkNormalizer(field string, n *componentJSON) error {
	if n == nil {
		return nil
	}
	switch n.Type {
	case "NFC":
		return nil
	case "Sequence":
		for i, c := range n.Normalizers {
			if c == nil {
				return unsupported(fmt.Sprintf("%s.normalizers[%d]", field, i), "null")
			}
			if err := checkNormalizer(fmt.Sprintf("%s.normalizers[%d]", field, i), c); err != nil {
				return err
			}
		}
		return nil
	}
	return unsupported(field+".type", n.Type)
}

// checkPreTokenizer accepts exactly Qwen2's and Qwen3.5's: a Split with
// qwen2Pattern or qwen35Pattern (isolated) then a ByteLevel without its
// own expression or prefix space.
func checkPreTokenizer(p *componentJSON) (wordSplitter, error) {
	if p == nil {
		return wordSplitter{}, unsupported("pre_tokenizer", "null")
	}
	if p.Type != "Sequence" {
		return wordSplitter{}, unsupported("pre_tokenizer.type", p.Type)
	}
	if len(p.Pretokenizers) != 2 || p.Pretokenizers[0] == nil || p.Pretokenizers[1] == nil {
		return wordSplitter{}, unsupported("pre_tokenizer.pretokenizers", fmt.Sprintf("%d steps (want Split, ByteLevel)", len(p.Pretokenizers)))
	}
	split, bl := p.Pretokenizers[0], p.Pretokenizers[1]
	const sf, bf = "pre_tokenizer.pretokenizers[0]", "pre_tokenizer.pretokenizers[1]"
	switch {
	case split.Type != "Split":
		return wordSplitter{}, unsupported(sf+".type", split.Type)
	case split.Pattern.Regex == nil:
		return wordSplitter{}, unsupported(sf+".pattern", "not a Regex")
	case *split.Pattern.Regex != qwen2Pattern && *split.Pattern.Regex != qwen35Pattern:
		return wordSplitter{}, unsupported(sf+".pattern.Regex", *split.Pattern.Regex)
	case split.Behavior != "Isolated":
		return wordSplitter{}, unsupported(sf+".behavior", split.Behavior)
	case split.Invert:
		return wordSplitter{}, unsupported(sf+".invert", true)
	case bl.Type != "ByteLevel":
		return wordSplitter{}, unsupported(bf+".type", bl.Type)
	case bl.AddPrefixSpace:
		return wordSplitter{}, unsupported(bf+".add_prefix_space", true)
	case bl.UseRegex:
		return wordSplitter{}, unsupported(bf+".use_regex", true)
	}
	return wordSplitter{marksAreLetters: *split.Pattern.Regex == qwen35Pattern}, nil
}

// buildVocab fills the id tables from the model's vocabulary and the added
// tokens.
func (t *Tokenizer) buildVocab(f *tokenizerJSON) error {
	size := int32(0)
	for tok, id := range f.Model.Vocab {
		if id < 0 {
			return fmt.Errorf("%w: model.vocab[%q] = %d is negative", ErrFormat, tok, id)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return fmt.Errorf("%w: added token %q has id %d", ErrFormat, a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	t.tokens = make([]string, size)
	t.known = make([]bool, size)
	t.special = make([]bool, size)
	t.vocab = f.Model.Vocab
	for tok, id := range t.vocab {
		t.tokens[id], t.known[id] = tok, true
	}
	for _, a := range f.AddedTokens {
		t.tokens[a.ID], t.known[a.ID] = a.Content, true
		t.special[a.ID] = a.Special
		t.added = append(t.added, addedToken{content: a.Content, id: a.ID})
		t.addedFirst[a.Content[0]] = true
	}
	// Longest first, so that the first match at a position is the longest.
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].content) > len(t.added[j].content) })

	t.bytesOff = make([]uint32, size+1)
	for id, tok := range t.tokens {
		t.bytes = byteLevelDecode(t.bytes, tok)
		t.bytesOff[id+1] = uint32(len(t.bytes))
	}
	for b := range 256 {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return fmt.Errorf("%w: model.vocab has no token for byte 0x%02x (%q)", ErrFormat, b, byteToRune[b])
		}
		t.byteID[b] = id
	}
	if t.ignoreMerges {
		t.wordID = make(map[string]int32, len(f.Model.Vocab))
		for _, id := range f.Model.Vocab {
			t.wordID[string(t.tokenBytes(id))] = id
		}
	}
	return nil
}

// buildMerges reads the merges, as ["a", "b"] pairs or as "a b" strings.
func (t *Tokenizer) buildMerges(raw json.RawMessage) error {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		var lines []string
		if json.Unmarshal(raw, &lines) != nil {
			return fmt.Errorf("%w: model.merges is neither pairs nor strings: %v", ErrFormat, err)
		}
		pairs = make([][2]string, len(lines))
		for i, l := range lines {
			a, b, ok := strings.Cut(l, " ")
			if !ok || strings.Contains(b, " ") {
				return fmt.Errorf("%w: model.merges[%d] = %q is not two tokens", ErrFormat, i, l)
			}
			pairs[i] = [2]string{a, b}
		}
	}
	t.merges = make(map[uint64]merge, len(pairs))
	for i, p := range pairs {
		a, okA := t.vocab[p[0]]
		b, okB := t.vocab[p[1]]
		ab, okAB := t.vocab[p[0]+p[1]]
		if !okA || !okB || !okAB {
			return fmt.Errorf("%w: model.merges[%d] = %q: a token is not in model.vocab", ErrFormat, i, p)
		}
		t.merges[pairKey(a, b)] = merge{rank: int32(i), id: ab}
	}
	return nil
}
