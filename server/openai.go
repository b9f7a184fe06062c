package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/textgen"
	"github.com/puremetal/puremetal/tokenizer"
)

// params are the request fields the two completion endpoints share.
type params struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	N             *int            `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// maxStops is the most stop sequences a request may give, as OpenAI's.
const maxStops = 4

// readJSON decodes the request's body, bounded by the server's limit,
// into v.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) *apiError {
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.maxBody))
	err := d.Decode(v)
	if err == nil && d.More() {
		err = errors.New("data after the JSON object")
	}
	var tooLarge *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return newError(http.StatusRequestEntityTooLarge, invalidRequest, "", "request_too_large", "the request body passes the limit of %d bytes", tooLarge.Limit)
	case errors.As(err, &typeErr):
		field := strings.TrimPrefix(typeErr.Field, "params.") // the embedded struct's name
		return invalid(field, "%s: JSON %s where %s was expected", field, typeErr.Value, typeErr.Type)
	}
	return invalid("", "the request body is not valid JSON: %v", err)
}

// generation reads the shared fields into g; maxTokens is the request's
// completion limit (nil: the default, def, 0 meaning as many as fit).
func (s *Server) generation(p params, maxTokens *int, def int) (generation, *apiError) {
	g := generation{stream: p.Stream}
	switch {
	case p.Model == "":
		return g, invalid("model", "you must give the model parameter (%q)", s.model)
	case p.Model != s.model:
		return g, s.unknownModel(p.Model)
	case p.N != nil && *p.N != 1:
		return g, invalid("n", "n %d: only one choice (n = 1) is generated", *p.N)
	case maxTokens != nil && *maxTokens < 1:
		return g, invalid("max_tokens", "max_tokens %d: want at least 1", *maxTokens)
	case p.Temperature != nil && (*p.Temperature < 0 || *p.Temperature > 2):
		return g, invalid("temperature", "temperature %g: want a number from 0 to 2", *p.Temperature)
	case p.TopP != nil && (*p.TopP <= 0 || *p.TopP > 1):
		return g, invalid("top_p", "top_p %g: want a number above 0, at most 1", *p.TopP)
	case p.StreamOptions != nil && !p.Stream:
		return g, invalid("stream_options", "stream_options is only allowed with stream true")
	}
	g.opts.MaxTokens = def
	if maxTokens != nil {
		g.opts.MaxTokens = *maxTokens
	}
	g.opts.Sampling = model.Sampling{Temperature: 1, TopP: 1, Seed: rand.Uint64()}
	if p.Temperature != nil {
		g.opts.Sampling.Temperature = float32(*p.Temperature)
	}
	if p.TopP != nil {
		g.opts.Sampling.TopP = float32(*p.TopP)
	}
	if p.Seed != nil {
		g.opts.Sampling.Seed = uint64(*p.Seed)
	}
	g.includeUsage = p.StreamOptions != nil && p.StreamOptions.IncludeUsage
	var err error
	if g.opts.Stop, err = stops(p.Stop); err != nil {
		return g, invalid("stop", "stop: %v", err)
	}
	return g, nil
}

// stops reads stop, a string or a list of strings, or nothing.
func stops(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want a string or a list of strings")
	}
	if len(list) > maxStops {
		return nil, errors.New("more than 4 sequences")
	}
	return list, nil
}

// chatRequest is a POST /v1/chat/completions body.
type chatRequest struct {
	params
	Messages            json.RawMessage `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	// ChatTemplateKwargs are variables of the chat template (vLLM's
	// extension): enable_thinking.
	ChatTemplateKwargs *struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxTokens = req.MaxCompletionTokens
	}
	g, e := s.generation(req.params, maxTokens, 0)
	if e == nil {
		e = checkMessages(req.Messages)
	}
	if e != nil {
		s.writeError(w, e)
		return
	}
	o := tokenizer.ChatOptions{AddGenerationPrompt: true}
	if k := req.ChatTemplateKwargs; k != nil && k.EnableThinking != nil {
		o.DisableThinking = !*k.EnableThinking
	}
	prompt, err := s.p.EncodeChat(req.Messages, o)
	if err != nil {
		s.writeError(w, generationError(err, "messages"))
		return
	}
	g.prompt, g.promptParam = prompt, "messages"
	s.generate(w, r, g, &chatFormat{id: newID("chatcmpl-"), model: s.model, created: now()})
}

// checkMessages checks messages is a list of objects, each with a role.
func checkMessages(raw json.RawMessage) *apiError {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return invalid("messages", "messages is required")
	}
	var msgs []struct {
		Role *string `json:"role"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return invalid("messages", "messages: want a list of message objects with a string role")
	}
	if len(msgs) == 0 {
		return invalid("messages", "messages is empty: want at least one message")
	}
	for i, m := range msgs {
		if m.Role == nil {
			return invalid("messages", "messages[%d] has no role", i)
		}
	}
	return nil
}

// completionRequest is a POST /v1/completions body.
type completionRequest struct {
	params
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
	Logprobs *int            `json:"logprobs"`
	BestOf   *int            `json:"best_of"`
}

// defaultCompletionTokens is max_tokens when a completion request has
// none, as OpenAI's.
const defaultCompletionTokens = 16

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.readJSON(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	g, e := s.generation(req.params, req.MaxTokens, defaultCompletionTokens)
	switch {
	case e != nil:
	case req.Echo:
		e = invalid("echo", "echo is not supported")
	case req.Suffix != nil && *req.Suffix != "":
		e = invalid("suffix", "suffix is not supported")
	case req.Logprobs != nil:
		e = invalid("logprobs", "logprobs is not supported")
	case req.BestOf != nil && *req.BestOf != 1:
		e = invalid("best_of", "best_of %d: only 1 is supported", *req.BestOf)
	default:
		g.prompt, e = s.completionPrompt(req.Prompt)
	}
	if e != nil {
		s.writeError(w, e)
		return
	}
	g.promptParam = "prompt"
	s.generate(w, r, g, &completionFormat{id: newID("cmpl-"), model: s.model, created: now()})
}

// completionPrompt reads a completion's prompt: a string, or token ids,
// or a list of one of either.
func (s *Server) completionPrompt(raw json.RawMessage) ([]int32, *apiError) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalid("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return s.p.Encode(text), nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		return ids, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return s.p.Encode(texts[0]), nil
	}
	var idLists [][]int32
	if json.Unmarshal(raw, &idLists) == nil && len(idLists) == 1 {
		return idLists[0], nil
	}
	if len(texts) > 1 || len(idLists) > 1 {
		return nil, invalid("prompt", "a list of %d prompts: only one prompt per request", max(len(texts), len(idLists)))
	}
	return nil, invalid("prompt", "prompt: want a string, a list of token ids, or a list of one of either")
}

// usage is OpenAI's usage object.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(u textgen.Usage) *usage {
	return &usage{u.PromptTokens, u.CompletionTokens, u.TotalTokens()}
}

// finishReason is a finish reason, or null when empty.
func finishReason(f textgen.FinishReason) *string {
	if f == "" {
		return nil
	}
	s := string(f)
	return &s
}

// chatFormat shapes /v1/chat/completions' responses: a chat.completion,
// or chat.completion.chunk events.
type chatFormat struct {
	id, model string
	created   int64
}

type chatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

// A response is a completion, whole or a chunk of a stream, of either
// endpoint: C is its choices' type.
type response[C any] struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []C    `json:"choices"`
	Usage   *usage `json:"usage"`
}

func (f *chatFormat) response(object string, choices []chatChoice, u *usage) response[chatChoice] {
	return response[chatChoice]{ID: f.id, Object: object, Created: f.created, Model: f.model, Choices: choices, Usage: u}
}

func (f *chatFormat) whole(text string, res textgen.Result) any {
	return f.response("chat.completion", []chatChoice{{Message: &chatMessage{Role: "assistant", Content: &text}, FinishReason: finishReason(res.FinishReason)}}, usageOf(res.Usage))
}

func (f *chatFormat) start() any {
	empty := ""
	return f.response("chat.completion.chunk", []chatChoice{{Delta: &chatMessage{Role: "assistant", Content: &empty}}}, nil)
}

func (f *chatFormat) chunk(piece string, finish textgen.FinishReason) any {
	delta := &chatMessage{}
	if finish == "" {
		delta.Content = &piece
	}
	return f.response("chat.completion.chunk", []chatChoice{{Delta: delta, FinishReason: finishReason(finish)}}, nil)
}

func (f *chatFormat) usage(u textgen.Usage) any {
	return f.response("chat.completion.chunk", []chatChoice{}, usageOf(u))
}

// completionFormat shapes /v1/completions' responses: a text_completion,
// whole or in events.
type completionFormat struct {
	id, model string
	created   int64
}

type completionChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

func (f *completionFormat) response(choices []completionChoice, u *usage) response[completionChoice] {
	return response[completionChoice]{ID: f.id, Object: "text_completion", Created: f.created, Model: f.model, Choices: choices, Usage: u}
}

func (f *completionFormat) whole(text string, res textgen.Result) any {
	return f.response([]completionChoice{{Text: text, FinishReason: finishReason(res.FinishReason)}}, usageOf(res.Usage))
}

func (f *completionFormat) start() any { return nil }

func (f *completionFormat) chunk(piece string, finish textgen.FinishReason) any {
	return f.response([]completionChoice{{Text: piece, FinishReason: finishReason(finish)}}, nil)
}

func (f *completionFormat) usage(u textgen.Usage) any {
	return f.response([]completionChoice{}, usageOf(u))
}
