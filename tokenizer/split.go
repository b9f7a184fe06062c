package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The Split pre-tokenizer expressions that [wordSplitter] implements:
// Qwen2's, of Qwen2, Qwen3 and Qwen3-Next (GPT-4's cl100k expression with
// single digits), and Qwen3.5's, which is Qwen2's with the combining marks
// \p{M} beside the letters \p{L}.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// A wordSplitter finds the words of Qwen2's expression, or of Qwen3.5's
// when marksAreLetters is set: there a mark joins a run of letters, and
// the optional character before a run (which may be a mark) gives the same
// words as a run that starts with it.
type wordSplitter struct {
	marksAreLetters bool
}

// Character classes of the expressions: \p{L} (with \p{M} for Qwen3.5),
// \p{N}, \s (Unicode's White_Space, which is what unicode.IsSpace tests)
// and everything else. No ASCII character is a mark.
const (
	classOther = iota
	classLetter
	classNumber
	classSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := rune(0); c < utf8.RuneSelf; c++ {
		switch {
		case unicode.IsLetter(c):
			t[c] = classLetter
		case unicode.IsNumber(c):
			t[c] = classNumber
		case unicode.IsSpace(c):
			t[c] = classSpace
		}
	}
	return t
}()

// classOf returns the class and the byte length of the first character of
// s, which is valid UTF-8 and not empty.
func (w wordSplitter) classOf(s string) (class uint8, size int) {
	if c := s[0]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, size := utf8.DecodeRuneInString(s)
	switch {
	case unicode.IsLetter(r), w.marksAreLetters && unicode.IsMark(r):
		return classLetter, size
	case unicode.IsNumber(r):
		return classNumber, size
	case unicode.IsSpace(r):
		return classSpace, size
	}
	return classOther, size
}

// runOf returns the byte length of the run of characters of class c at the
// start of s.
func (w wordSplitter) runOf(s string, c uint8) int {
	n := 0
	for n < len(s) {
		k, size := w.classOf(s[n:])
		if k != c {
			break
		}
		n += size
	}
	return n
}

// splitWord returns the byte length of the first word of s (valid UTF-8,
// not empty) as the regular-expression engine of HF's Split pre-tokenizer
// finds it: the first alternative that matches at the start of s wins,
// each with the length its greedy quantifiers and backtracking give. Every
// character starts some alternative, so words tile the text.
func (w wordSplitter) splitWord(s string) int {
	class, size := w.classOf(s)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[0] == '\'' {
		if n := contraction(s[1:]); n > 0 {
			return 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if class == classLetter {
		return size + w.runOf(s[size:], classLetter)
	}
	if class != classNumber && s[0] != '\r' && s[0] != '\n' {
		if n := w.runOf(s[size:], classLetter); n > 0 {
			return size + n
		}
	}
	// \p{N}
	if class == classNumber {
		return size
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	start := 0
	if s[0] == ' ' {
		start = 1
	}
	if n := w.runOf(s[start:], classOther); n > 0 {
		end := start + n
		for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
			end++
		}
		return end
	}
	// Only whitespace is left: s starts with a run of it.
	space := w.runOf(s, classSpace)
	// \s*[\r\n]+: \s* gives characters back until a line break follows;
	// the match ends after the run's last line break.
	for i := space - 1; i >= 0; i-- {
		if s[i] == '\r' || s[i] == '\n' {
			return i + 1
		}
	}
	// \s+(?!\S): the whole run at the end of the text, else all of it
	// but its last character, so that this one joins the next word.
	if space == len(s) {
		return space
	}
	if _, last := utf8.DecodeLastRuneInString(s[:space]); last < space {
		return space - last
	}
	// \s+
	return space
}

// contraction returns the length of the contraction suffix at the start
// of s ("s", "t", "re", "ve", "m", "ll" or "d" in any case), or 0. Under
// Unicode case folding 'ſ' (U+017F) is an 's' too.
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	fold := func(c byte) byte { return c | 0x20 }
	switch fold(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && fold(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && fold(s[1]) == 'l' {
			return 2
		}
	}
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF {
		return 2
	}
	return 0
}
