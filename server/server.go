// Package server is an HTTP server of OpenAI's API over a model:
// POST /v1/chat/completions and POST /v1/completions (whole or streamed as
// server-sent events), GET /v1/models and GET /health. A [Server] is an
// http.Handler that a program mounts on its own http.Server; the command
// puremetal serve runs one.
//
// The text work — chat template, encoding, streaming decoding, stop
// sequences, finish reasons and usage — is package textgen's; this
// package reads OpenAI's requests, answers in OpenAI's shapes and maps
// errors to HTTP statuses: bad JSON or parameters 400, a prompt and
// max_tokens past the context 400 (context_length_exceeded), an unknown
// model 404 (model_not_found), a wrong method 405, a body too large 413,
// too many concurrent requests 429 (with Retry-After), a generator shut
// down 503.
//
// A request's context goes to the generation: a client that disconnects,
// even mid-stream, stops its generation.
package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/puremetal/puremetal/textgen"
	"github.com/puremetal/puremetal/tokenizer"
)

// Generator generates token ids after a prompt of token ids; it must be
// safe for concurrent use. *model.Batcher is one.
type Generator = textgen.Generator

// Options configure a Server.
type Options struct {
	// Model is the model's id, which /v1/models lists and requests must
	// name ("puremetal" when empty).
	Model string
	// MaxLen is the most positions a sequence holds, prompt and
	// completion (the model's Options.MaxLen; 4096 when 0).
	MaxLen int
	// MaxBodyBytes bounds a request's body (8 MiB when 0).
	MaxBodyBytes int64
	// RetryAfter is the wait a 429 asks for, in whole seconds (1 when 0).
	RetryAfter int
	// ErrorLog receives errors that cannot be answered (a stream broken
	// after it started); nil discards them.
	ErrorLog *log.Logger
}

// A Server answers OpenAI's API with a model.
type Server struct {
	p          *textgen.Pipeline
	model      string
	maxBody    int64
	retryAfter int
	created    int64
	log        *log.Logger
}

// New returns a Server generating with gen, encoding with tok and
// rendering chat messages with chat (nil: /v1/chat/completions answers
// 400).
func New(gen Generator, tok *tokenizer.Tokenizer, chat *tokenizer.ChatTemplate, o Options) *Server {
	if o.Model == "" {
		o.Model = "puremetal"
	}
	if o.MaxLen == 0 {
		o.MaxLen = 4096
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = 1
	}
	if o.ErrorLog == nil {
		o.ErrorLog = log.New(io.Discard, "", 0)
	}
	return &Server{p: textgen.New(gen, tok, chat, o.MaxLen), model: o.Model, maxBody: o.MaxBodyBytes,
		retryAfter: o.RetryAfter, created: time.Now().Unix(), log: o.ErrorLog}
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := func(method string, h func(http.ResponseWriter, *http.Request)) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			s.writeError(w, newError(http.StatusMethodNotAllowed, invalidRequest, "", "method_not_allowed", "%s %s: the method is not allowed, use %s", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	}
	switch p := r.URL.Path; {
	case p == "/v1/chat/completions":
		route(http.MethodPost, s.chatCompletions)
	case p == "/v1/completions":
		route(http.MethodPost, s.completions)
	case p == "/v1/models":
		route(http.MethodGet, s.models)
	case len(p) > len("/v1/models/") && p[:len("/v1/models/")] == "/v1/models/":
		route(http.MethodGet, s.modelByID)
	case p == "/health":
		route(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})
	default:
		s.writeError(w, newError(http.StatusNotFound, invalidRequest, "", "unknown_url", "invalid URL (%s %s)", r.Method, p))
	}
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.model, Object: "model", Created: s.created, OwnedBy: "puremetal"}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", []modelObject{s.modelObject()}})
}

func (s *Server) modelByID(w http.ResponseWriter, r *http.Request) {
	if id := r.URL.Path[len("/v1/models/"):]; id != s.model {
		s.writeError(w, s.unknownModel(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

func (s *Server) unknownModel(id string) *apiError {
	return newError(http.StatusNotFound, invalidRequest, "model", "model_not_found", "the model %q does not exist: this server serves %q", id, s.model)
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// newID returns a response id: prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// An eventStream writes server-sent events, sending the response's
// headers with the first one.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

// send writes v as one event's data and flushes it.
func (e *eventStream) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write(b)
}

func (e *eventStream) write(data []byte) error {
	if !e.started {
		e.started = true
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		e.w.WriteHeader(http.StatusOK)
	}
	if _, err := io.WriteString(e.w, "data: "); err != nil {
		return err
	}
	if _, err := e.w.Write(data); err != nil {
		return err
	}
	if _, err := io.WriteString(e.w, "\n\n"); err != nil {
		return err
	}
	return e.rc.Flush()
}

// generation is what a request asks to generate, read from its body.
type generation struct {
	prompt       []int32
	opts         textgen.Options
	stream       bool
	includeUsage bool
	promptParam  string // the field the prompt came in
}

// A format shapes one endpoint's responses.
type format interface {
	// whole is the response of a generation not streamed.
	whole(text string, res textgen.Result) any
	// start is the first event of a stream, or nil for none.
	start() any
	// chunk is a streamed event of a piece of text, or of the finish
	// reason when it is not empty.
	chunk(piece string, finish textgen.FinishReason) any
	// usage is the stream's last event when the request asks for usage.
	usage(u textgen.Usage) any
}

// generate runs g and answers in f's shapes.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, g generation, f format) {
	ctx := r.Context()
	if !g.stream {
		text, res, err := s.p.Complete(ctx, g.prompt, g.opts)
		if err != nil {
			if ctx.Err() == nil {
				s.writeError(w, generationError(err, g.promptParam))
			}
			return
		}
		writeJSON(w, http.StatusOK, f.whole(text, res))
		return
	}
	es := &eventStream{w: w, rc: http.NewResponseController(w)}
	begin := func() error {
		if es.started {
			return nil
		}
		if v := f.start(); v != nil {
			return es.send(v)
		}
		return nil
	}
	res, err := s.p.Stream(ctx, g.prompt, g.opts, func(piece string) error {
		if err := begin(); err != nil {
			return err
		}
		return es.send(f.chunk(piece, ""))
	})
	if err == nil {
		err = begin()
	}
	if err == nil {
		err = es.send(f.chunk("", res.FinishReason))
	}
	if err == nil && g.includeUsage {
		err = es.send(f.usage(res.Usage))
	}
	if err == nil {
		err = es.write([]byte("[DONE]"))
	}
	switch {
	case err == nil || ctx.Err() != nil:
	case !es.started:
		s.writeError(w, generationError(err, g.promptParam))
	default:
		// The stream has begun: the error is its last event.
		s.log.Printf("%s: stream ended early: %v", r.URL.Path, err)
		es.send(struct {
			Error *apiError `json:"error"`
		}{generationError(err, g.promptParam)})
	}
}

// now is the Unix time responses are stamped with.
func now() int64 { return time.Now().Unix() }
