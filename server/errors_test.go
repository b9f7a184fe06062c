package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/server"
)

// post sends body to path and returns the status, the headers and the
// body.
func do(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, []byte(b.String())
}

// checkError checks body is OpenAI's error shape, exactly the four
// fields, with a message, and the type, param and code given ("" for
// null).
func checkError(t *testing.T, name string, body []byte, typ, param, code string) {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || len(e.Error) != 4 {
		t.Errorf("%s: not OpenAI's error shape: %s", name, body)
		return
	}
	str := func(k string) string {
		v, ok := e.Error[k]
		if !ok {
			t.Errorf("%s: the error has no %q: %s", name, k, body)
		}
		s, _ := v.(string)
		return s
	}
	if msg := str("message"); msg == "" {
		t.Errorf("%s: an empty message: %s", name, body)
	}
	if got := str("type"); got != typ {
		t.Errorf("%s: type %q, want %q", name, got, typ)
	}
	if got := str("param"); got != param {
		t.Errorf("%s: param %q, want %q: %s", name, got, param, body)
	}
	if got := str("code"); got != code {
		t.Errorf("%s: code %q, want %q: %s", name, got, code, body)
	}
}

// TestMalformedRequests: requests that cannot be served are answered with
// the right status and OpenAI's error shape, before anything is
// generated; /health answers.
func TestMalformedRequests(t *testing.T) {
	c, gen := testEngine(t, 64, 1, 0)
	ts := httptest.NewServer(server.New(gen, c.Tok, c.Chat, server.Options{Model: modelID, MaxLen: c.MaxLen, MaxBodyBytes: 4096}))
	defer ts.Close()
	chat, text := ts.URL+"/v1/chat/completions", ts.URL+"/v1/completions"
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	long := strings.Repeat("hello world ", 40)
	const inv = "invalid_request_error"
	for _, c := range []struct {
		name, method, url, body string
		status                  int
		param, code             string
	}{
		{"bad JSON", "POST", chat, `{"model":"tiny",`, 400, "", ""},
		{"JSON of the wrong type", "POST", chat, `{"model":"tiny",` + msgs + `,"max_tokens":"5"}`, 400, "max_tokens", ""},
		{"no messages", "POST", chat, `{"model":"tiny"}`, 400, "messages", ""},
		{"empty messages", "POST", chat, `{"model":"tiny","messages":[]}`, 400, "messages", ""},
		{"a message without a role", "POST", chat, `{"model":"tiny","messages":[{"content":"Hi"}]}`, 400, "messages", ""},
		{"n = 2", "POST", chat, `{"model":"tiny",` + msgs + `,"n":2}`, 400, "n", ""},
		{"no model", "POST", chat, `{` + msgs + `}`, 400, "model", ""},
		{"unknown model", "POST", chat, `{"model":"gpt-4o",` + msgs + `}`, 404, "model", "model_not_found"},
		{"max_tokens 0", "POST", chat, `{"model":"tiny",` + msgs + `,"max_tokens":0}`, 400, "max_tokens", ""},
		{"temperature 3", "POST", chat, `{"model":"tiny",` + msgs + `,"temperature":3}`, 400, "temperature", ""},
		{"top_p 0", "POST", chat, `{"model":"tiny",` + msgs + `,"top_p":0}`, 400, "top_p", ""},
		{"5 stop sequences", "POST", chat, `{"model":"tiny",` + msgs + `,"stop":["a","b","c","d","e"]}`, 400, "stop", ""},
		{"stop of a number", "POST", chat, `{"model":"tiny",` + msgs + `,"stop":5}`, 400, "stop", ""},
		{"stream_options without stream", "POST", chat, `{"model":"tiny",` + msgs + `,"stream_options":{"include_usage":true}}`, 400, "stream_options", ""},
		{"max_tokens past the context", "POST", chat, `{"model":"tiny",` + msgs + `,"max_tokens":64}`, 400, "messages", "context_length_exceeded"},
		{"a prompt past the context", "POST", chat, `{"model":"tiny","messages":[{"role":"user","content":"` + long + `"}],"max_tokens":1}`, 400, "messages", "context_length_exceeded"},
		{"a streamed prompt past the context", "POST", chat, `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "messages", "context_length_exceeded"},
		{"a completion past the context", "POST", text, `{"model":"tiny","prompt":"` + long + `"}`, 400, "prompt", "context_length_exceeded"},
		{"no prompt", "POST", text, `{"model":"tiny"}`, 400, "prompt", ""},
		{"two prompts", "POST", text, `{"model":"tiny","prompt":["a","b"]}`, 400, "prompt", ""},
		{"a prompt of an object", "POST", text, `{"model":"tiny","prompt":{}}`, 400, "prompt", ""},
		{"echo", "POST", text, `{"model":"tiny","prompt":"a","echo":true}`, 400, "echo", ""},
		{"a token id out of the vocabulary", "POST", text, `{"model":"tiny","prompt":[1,99999],"max_tokens":1}`, 400, "", ""},
		{"a body too large", "POST", chat, `{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "", "request_too_large"},
		{"GET of chat", "GET", chat, "", 405, "", "method_not_allowed"},
		{"POST of models", "POST", ts.URL + "/v1/models", "", 405, "", "method_not_allowed"},
		{"an unknown path", "GET", ts.URL + "/v1/embeddings", "", 404, "", "unknown_url"},
		{"an unknown model's object", "GET", ts.URL + "/v1/models/gpt-4o", "", 404, "model", "model_not_found"},
	} {
		status, h, body := do(t, c.method, c.url, c.body)
		if status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, status, c.status, body)
		}
		if status == 405 && h.Get("Allow") == "" {
			t.Errorf("%s: a 405 without Allow", c.name)
		}
		checkError(t, c.name, body, inv, c.param, c.code)
	}
	if status, _, body := do(t, "GET", ts.URL+"/health", ""); status != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Errorf("/health: %d %s", status, body)
	}
	if status, _, body := do(t, "GET", ts.URL+"/v1/models/"+modelID, ""); status != 200 || !strings.Contains(string(body), `"id":"`+modelID+`"`) {
		t.Errorf("/v1/models/%s: %d %s", modelID, status, body)
	}
}

// holding wraps a generator: after a generation's second token it waits
// for the request's context to end, and reports how each generation
// ended.
type holding struct {
	server.Generator
	held  chan struct{}
	ended chan ending
}

type ending struct {
	tokens  int
	ctxErr  error
	natural bool // the generator ran out, not stopped by its consumer or ctx
}

func (h *holding) Generate(ctx context.Context, prompt []int32, o model.GenerateOptions) iter.Seq2[int32, error] {
	return func(yield func(int32, error) bool) {
		e := ending{natural: true}
		defer func() { e.ctxErr = ctx.Err(); h.ended <- e }()
		for id, err := range h.Generator.Generate(ctx, prompt, o) {
			if err != nil {
				e.natural = false
				yield(0, err)
				return
			}
			e.tokens++
			if !yield(id, nil) {
				e.natural = false
				return
			}
			if e.tokens == 2 {
				h.held <- struct{}{}
				select {
				case <-ctx.Done():
				case <-time.After(time.Minute):
				}
			}
		}
	}
}

// TestCancelBusyClosed: a client that disconnects mid-stream stops its
// generation (the generator sees the request's context canceled and
// yields no more); while one generation holds the one session and the
// queue has no room, another request is refused with 429 and a
// Retry-After; the session is free again afterwards; a generator closed
// (the server shutting down) answers 503.
func TestCancelBusyClosed(t *testing.T) {
	c, gen := testEngine(t, 64, 1, 0)
	h := &holding{Generator: gen, held: make(chan struct{}, 1), ended: make(chan ending, 4)}
	ts := serve(t, c, h)
	url := ts.URL + "/v1/chat/completions"
	const maxTokens = 40

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"model":"tiny","stream":true,"temperature":0,"max_tokens":40,"messages":[{"role":"user","content":"Hello!"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("the stream's first line: %q, %v", line, err)
	}
	<-h.held

	status, hdr, body := do(t, "POST", url, `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"Hi"}]}`)
	if status != 429 || hdr.Get("Retry-After") == "" {
		t.Errorf("a request while the session is held: %d, Retry-After %q, want 429 and a Retry-After", status, hdr.Get("Retry-After"))
	}
	checkError(t, "429", body, "requests", "", "rate_limit_exceeded")
	if e := <-h.ended; e.natural || e.ctxErr != nil {
		t.Errorf("the refused request's generation: %+v, want refused", e)
	}

	cancel() // the client goes away mid-stream
	resp.Body.Close()
	select {
	case e := <-h.ended:
		if e.natural || e.ctxErr != context.Canceled || e.tokens >= maxTokens {
			t.Errorf("the disconnected client's generation ended %+v, want canceled before %d tokens", e, maxTokens)
		}
	case <-time.After(time.Minute):
		t.Fatal("the disconnected client's generation did not end")
	}

	status, _, body = do(t, "POST", url, `{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`)
	if status != 200 {
		t.Errorf("a request after the disconnect: %d %s", status, body)
	}
	<-h.ended

	gen.Close()
	status, _, body = do(t, "POST", url, `{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"Hi"}]}`)
	if status != 503 {
		t.Errorf("a request after Close: %d, want 503", status)
	}
	checkError(t, "503", body, "server_error", "", "service_unavailable")
}
