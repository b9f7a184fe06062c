package tokenizer

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// Decode returns the text of ids, as HF's decode(ids,
// skip_special_tokens=skipSpecial): the tokens' bytes one after another,
// each ill-formed UTF-8 subsequence (such as a character whose bytes are
// split across a token left out) replaced by one U+FFFD.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	b, err := t.AppendDecode(nil, ids, skipSpecial)
	return string(b), err
}

// AppendDecode appends the text of ids to dst, as [Tokenizer.Decode].
func (t *Tokenizer) AppendDecode(dst []byte, ids []int32, skipSpecial bool) ([]byte, error) {
	start := len(dst)
	for _, id := range ids {
		b, err := t.bytesOf(id, skipSpecial)
		if err != nil {
			return dst[:start], err
		}
		dst = append(dst, b...)
	}
	if !utf8.Valid(dst[start:]) {
		raw := slices.Clone(dst[start:])
		dst, _ = appendLossy(dst[:start], raw, true)
	}
	return dst, nil
}

// bytesOf returns the bytes of token id, none for a special token when
// skipSpecial is set.
func (t *Tokenizer) bytesOf(id int32, skipSpecial bool) ([]byte, error) {
	if id < 0 || int(id) >= len(t.tokens) || !t.known[id] {
		return nil, fmt.Errorf("%w: id %d, vocabulary of %d", ErrTokenID, id, len(t.tokens))
	}
	if skipSpecial && t.special[id] {
		return nil, nil
	}
	return t.tokenBytes(id), nil
}

// A Decoder decodes a stream of ids one at a time, giving out only whole
// UTF-8 characters: the bytes of a character that later ids may complete
// are held back. The text it gives out for a sequence of ids, Flush
// included, is [Tokenizer.Decode]'s for the whole sequence.
type Decoder struct {
	t           *Tokenizer
	skipSpecial bool
	held        []byte // the start of an incomplete character, then scratch
}

// NewDecoder returns a streaming decoder; skipSpecial leaves special
// tokens out.
func (t *Tokenizer) NewDecoder(skipSpecial bool) *Decoder {
	return &Decoder{t: t, skipSpecial: skipSpecial}
}

// Append appends to dst the text that id completes and returns the
// extended slice. Once its buffer has grown to the longest token, it
// does not allocate when dst has room.
func (d *Decoder) Append(dst []byte, id int32) ([]byte, error) {
	b, err := d.t.bytesOf(id, d.skipSpecial)
	if err != nil {
		return dst, err
	}
	if len(d.held) == 0 {
		dst, used := appendLossy(dst, b, false)
		d.held = append(d.held, b[used:]...)
		return dst, nil
	}
	d.held = append(d.held, b...)
	dst, used := appendLossy(dst, d.held, false)
	d.held = d.held[:copy(d.held, d.held[used:])]
	return dst, nil
}

// Flush appends what is held back (an incomplete character, as one
// U+FFFD) and makes the decoder ready for a new stream.
func (d *Decoder) Flush(dst []byte) []byte {
	dst, _ = appendLossy(dst, d.held, true)
	d.held = d.held[:0]
	return dst
}

// appendLossy appends src to dst as UTF-8, each maximal ill-formed
// subsequence (a byte that cannot start a character, or the start of a
// character cut short) replaced by U+FFFD, the substitution of Unicode's
// "maximal subparts" that Rust's from_utf8_lossy makes. Unless final, a
// character cut short by the end of src is not appended: used says how
// many bytes of src were.
func appendLossy(dst, src []byte, final bool) (out []byte, used int) {
	if utf8.Valid(src) {
		return append(dst, src...), len(src)
	}
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		n, lo, hi := utf8Lead(c)
		if n == 0 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			continue
		}
		j := 1
		for ; j < n && i+j < len(src); j++ {
			if b := src[i+j]; b < lo || b > hi {
				break
			}
			lo, hi = 0x80, 0xBF
		}
		switch {
		case j == n:
			dst = append(dst, src[i:i+n]...)
		case i+j == len(src) && !final:
			return dst, i
		default:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		i += j
	}
	return dst, i
}

// utf8Lead returns the length of the character a lead byte starts and the
// range its second byte must be in (Unicode's table of well-formed byte
// sequences), or n = 0 for a byte that starts none.
func utf8Lead(c byte) (n int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}
