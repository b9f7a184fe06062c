package tokenizer

// The byte-level alphabet of GPT-2 (HF's ByteLevel pre-tokenizer and
// decoder): every byte is written as one printable character so that a
// vocabulary of strings can hold arbitrary bytes. The printable bytes
// '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves; the other 68 bytes,
// in increasing order, become U+0100, U+0101, ... (so ' ' is 'Ġ' and '\n'
// is 'Ċ').
var byteToRune, runeToByte = byteLevelAlphabet()

// maxByteRune bounds the alphabet's characters: 256 + 68 stand-ins.
const maxByteRune = 256 + 68

func byteLevelAlphabet() (b2r [256]rune, r2b [maxByteRune]int16) {
	for i := range r2b {
		r2b[i] = -1
	}
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = next
			next++
		}
		b2r[b] = r
		r2b[r] = int16(b)
	}
	return b2r, r2b
}

// byteLevelDecode appends the bytes a token string stands for: each
// character through the alphabet, or, when any character is outside it
// (an added token such as "<tool_call>" is inside it; one with a space or
// a non-Latin letter is not), the string's own UTF-8 bytes, as HF's
// ByteLevel decoder does.
func byteLevelDecode(dst []byte, tok string) []byte {
	start := len(dst)
	out := dst
	for _, r := range tok {
		if r >= maxByteRune || runeToByte[r] < 0 {
			return append(out[:start], tok...)
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out
}
