package tokenizer

import "errors"

var (
	// ErrUnsupported reports a tokenizer.json or tokenizer_config.json
	// field, type or option that this package does not implement.
	ErrUnsupported = errors.New("tokenizer: unsupported")

	// ErrFormat reports a file that is not a well-formed tokenizer: bad
	// JSON, a merge of tokens the vocabulary lacks, a missing byte token.
	ErrFormat = errors.New("tokenizer: malformed")

	// ErrTokenID reports a token id outside the tokenizer's vocabulary.
	ErrTokenID = errors.New("tokenizer: token id out of range")

	// ErrTemplate reports a chat template that cannot be compiled or
	// rendered, or chat input that is not what a template expects.
	ErrTemplate = errors.New("tokenizer: chat template")
)
