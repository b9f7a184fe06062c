// Package tokenizer encodes text to token ids and decodes ids back to text
// the way Hugging Face's tokenizers library does for a byte-level BPE
// tokenizer.json (GPT-2 style, as Qwen2, Qwen3, Qwen3-Next and Qwen3.5
// ship, with Qwen2's or Qwen3.5's pre-tokenizer expression), and renders
// a tokenizer_config.json chat template as transformers'
// apply_chat_template does.
//
// Encoding follows the library's pipeline step by step:
//
//  1. added tokens (special or not) are found in the raw text first, the
//     leftmost and then longest match winning, and become their ids
//     unchanged;
//  2. every stretch of text between them is normalized (NFC);
//  3. the Split pre-tokenizer cuts it into words with the tokenizer's
//     regular expression, Qwen2's or Qwen3.5's, matched by hand (Go's
//     regexp has no lookahead for its \s+(?!\S)) alternative by
//     alternative, with the greedy quantifiers and backtracking of HF's
//     engine;
//  4. each word's UTF-8 bytes start as the byte-level alphabet's tokens and
//     are merged pair by pair, the pair of lowest merge rank first (the
//     leftmost among equals), until no pair of the word has a merge.
//
// Decoding maps every token back to its bytes and turns the bytes into
// UTF-8 with each ill-formed subsequence replaced by one U+FFFD, as Rust's
// String::from_utf8_lossy does. A [Decoder] does the same one id at a time
// for streaming, holding back the bytes of a character that is not
// complete yet.
//
// Input text that is not valid UTF-8 has each invalid byte replaced by
// U+FFFD before encoding (as Go's []rune conversion does), so that encoding
// never fails and decoding the ids gives valid UTF-8.
//
// A tokenizer.json that asks for anything this package does not implement
// (another model type, normalizer, pre-tokenizer expression, decoder,
// truncation, padding, an added token with lstrip, rstrip, single_word or
// normalized set, ...) is refused at load time with an error that names
// the field and matches [ErrUnsupported]; it never tokenizes differently
// without saying so.
package tokenizer
