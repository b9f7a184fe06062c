package textgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/tokenizer"
)

// A Generator generates token ids after a prompt of token ids, as
// model.Session.Generate does: it yields each generated id, or an error
// that ends the generation, and stops when ctx ends or the caller breaks.
type Generator interface {
	Generate(ctx context.Context, prompt []int32, o model.GenerateOptions) iter.Seq2[int32, error]
}

var (
	// ErrContextLength reports a prompt that, with the tokens asked for,
	// does not fit the positions a sequence holds.
	ErrContextLength = errors.New("textgen: prompt and completion pass the context length")

	// ErrInvalid reports options or a prompt that cannot be generated
	// from: an empty prompt, a negative MaxTokens, an empty stop sequence.
	ErrInvalid = errors.New("textgen: invalid request")

	// ErrNoChatTemplate reports a chat prompt asked of a Pipeline made
	// without a chat template.
	ErrNoChatTemplate = errors.New("textgen: the model has no chat template")
)

// A Pipeline turns text into token ids, generates with a Generator and
// turns the ids back into text. It is safe for concurrent use when its
// Generator is.
type Pipeline struct {
	gen    Generator
	tok    *tokenizer.Tokenizer
	chat   *tokenizer.ChatTemplate
	maxLen int
}

// New returns a Pipeline generating with gen, encoding and decoding with
// tok and rendering conversations with chat (nil: the model has no chat
// template). maxLen is the most positions one sequence holds (the
// model's Options.MaxLen): a prompt and its MaxTokens must fit in it.
func New(gen Generator, tok *tokenizer.Tokenizer, chat *tokenizer.ChatTemplate, maxLen int) *Pipeline {
	return &Pipeline{gen: gen, tok: tok, chat: chat, maxLen: maxLen}
}

// MaxLen is the most positions one sequence holds: its prompt and the
// tokens generated after it.
func (p *Pipeline) MaxLen() int { return p.maxLen }

// Tokenizer returns the pipeline's tokenizer.
func (p *Pipeline) Tokenizer() *tokenizer.Tokenizer { return p.tok }

// Encode returns the token ids of a plain-text prompt.
func (p *Pipeline) Encode(text string) []int32 { return p.tok.Encode(text) }

// EncodeChat renders messages, a JSON array of OpenAI's and transformers'
// message objects ({"role": ..., "content": ...}), through the chat
// template and returns the prompt's token ids. Messages the template
// cannot render are an error matching tokenizer.ErrTemplate.
func (p *Pipeline) EncodeChat(messages json.RawMessage, o tokenizer.ChatOptions) ([]int32, error) {
	if p.chat == nil {
		return nil, ErrNoChatTemplate
	}
	text, err := p.chat.RenderJSON(messages, o)
	if err != nil {
		return nil, err
	}
	return p.tok.Encode(text), nil
}

// Options say how a generation samples and when it stops.
type Options struct {
	// MaxTokens is the most tokens generated; 0 means as many as the
	// sequence's positions hold after the prompt.
	MaxTokens int
	// Sampling is how each token is picked (temperature 0: greedy).
	Sampling model.Sampling
	// Stop lists text sequences that end the generation: the text is cut
	// where the first of them begins, which is not part of it.
	Stop []string
}

// A FinishReason says why a generation ended, in OpenAI's words.
type FinishReason string

const (
	// FinishStop: the model generated an end-of-sequence token, or the
	// text reached a stop sequence.
	FinishStop FinishReason = "stop"
	// FinishLength: MaxTokens were generated, or the sequence filled its
	// positions.
	FinishLength FinishReason = "length"
)

// Usage counts a generation's tokens.
type Usage struct {
	PromptTokens     int // the prompt's
	CompletionTokens int // the generated ones, up to where it stopped
}

// TotalTokens is the prompt's and the completion's tokens together.
func (u Usage) TotalTokens() int { return u.PromptTokens + u.CompletionTokens }

// A Result is how a generation ended and what it used.
type Result struct {
	FinishReason FinishReason
	Usage        Usage
}

// check validates a generation's prompt and options against the
// sequence's positions and returns MaxTokens with 0 resolved.
func (p *Pipeline) check(prompt []int32, o Options) (int, error) {
	switch {
	case len(prompt) == 0:
		return 0, fmt.Errorf("%w: an empty prompt", ErrInvalid)
	case o.MaxTokens < 0:
		return 0, fmt.Errorf("%w: MaxTokens %d, want 0 (as many as fit) or more", ErrInvalid, o.MaxTokens)
	}
	for i, s := range o.Stop {
		if s == "" {
			return 0, fmt.Errorf("%w: stop sequence %d is empty", ErrInvalid, i)
		}
	}
	n := o.MaxTokens
	if n == 0 {
		n = p.maxLen - len(prompt)
	}
	if n < 1 || len(prompt)+n > p.maxLen {
		return 0, fmt.Errorf("%w: the context holds %d tokens, the request %d (%d in the prompt, %d in the completion)",
			ErrContextLength, p.maxLen, len(prompt)+max(n, 1), len(prompt), max(n, 1))
	}
	return n, nil
}

// Stream generates after prompt and calls emit with each piece of the
// generated text as it becomes final: whole UTF-8 characters, special
// tokens left out, nothing that may still turn out to begin a stop
// sequence. The pieces together are the completion's text. It returns
// when the generation ends; an error from the generator, from ctx or from
// emit ends it early and is returned, with the usage so far.
func (p *Pipeline) Stream(ctx context.Context, prompt []int32, o Options, emit func(piece string) error) (Result, error) {
	res := Result{Usage: Usage{PromptTokens: len(prompt)}}
	maxTokens, err := p.check(prompt, o)
	if err != nil {
		return res, err
	}
	dec := p.tok.NewDecoder(true)
	stops := newStopper(o.Stop)
	var buf []byte
	send := func(text []byte, final bool) (stopped bool, err error) {
		piece, stopped := stops.push(string(text), final)
		if piece != "" {
			err = emit(piece)
		}
		return stopped, err
	}
	genOpts := model.GenerateOptions{Sampling: o.Sampling, MaxTokens: maxTokens}
	for id, err := range p.gen.Generate(ctx, prompt, genOpts) {
		if errors.Is(err, model.ErrCacheFull) {
			break
		}
		if err != nil {
			return res, err
		}
		res.Usage.CompletionTokens++
		buf, err = dec.Append(buf[:0], id)
		if errors.Is(err, tokenizer.ErrTokenID) {
			// An id of the model's vocabulary that the tokenizer has no
			// token for (embedding rows past the tokenizer's padding
			// to a round size): it has no text.
			continue
		}
		if err != nil {
			return res, err
		}
		stopped, err := send(buf, false)
		if err != nil {
			return res, err
		}
		if stopped {
			res.FinishReason = FinishStop
			return res, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if stopped, err := send(dec.Flush(buf[:0]), true); err != nil || stopped {
		res.FinishReason = FinishStop
		return res, err
	}
	res.FinishReason = FinishStop
	if res.Usage.CompletionTokens >= maxTokens || len(prompt)+res.Usage.CompletionTokens >= p.maxLen {
		res.FinishReason = FinishLength
	}
	return res, nil
}

// Complete generates after prompt and returns the whole text, as Stream
// gives it.
func (p *Pipeline) Complete(ctx context.Context, prompt []int32, o Options) (string, Result, error) {
	var b strings.Builder
	res, err := p.Stream(ctx, prompt, o, func(piece string) error {
		b.WriteString(piece)
		return nil
	})
	return b.String(), res, err
}
