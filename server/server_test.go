package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/internal/tinymodel"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/server"
	"github.com/puremetal/puremetal/tokenizer"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testdevice.DeviceOpens)) }

// modelID is the id the test servers serve.
const modelID = "tiny"

// testEngine loads the tiny checkpoint with caches of maxLen positions and
// the generator a server runs on (batch sequences decoded together, queue
// more waiting), closed when the test ends.
func testEngine(t *testing.T, maxLen, batch, queue int) (*tinymodel.Checkpoint, *model.Batcher) {
	t.Helper()
	c := tinymodel.Load(t, maxLen)
	gen, err := c.Model.NewBatcher(model.BatchOptions{MaxBatch: batch, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	return c, gen
}

// serve starts a loopback server of gen, stopped when the test ends.
func serve(t *testing.T, c *tinymodel.Checkpoint, gen server.Generator) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(server.New(gen, c.Tok, c.Chat, server.Options{Model: modelID, MaxLen: c.MaxLen}))
	t.Cleanup(ts.Close)
	return ts
}

func client(ts *httptest.Server) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// A want is what a request must get: the tokenizer's decoding of the
// session's own greedy ids after the same prompt.
type want struct {
	text         string
	prompt, n    int
	finishReason string
}

// reference is what a request on prompt must get: the greedy text of a
// session of c's model.
func reference(t *testing.T, c *tinymodel.Checkpoint, s *model.Session, prompt []int32, maxTokens int) want {
	t.Helper()
	text, n := c.Greedy(t, s, prompt, maxTokens)
	w := want{text: text, prompt: len(prompt), n: n, finishReason: "length"}
	if n < maxTokens {
		w.finishReason = "stop"
	}
	return w
}

func chatPrompt(t *testing.T, c *tinymodel.Checkpoint, content string) []int32 {
	t.Helper()
	text, err := c.Chat.Render([]tokenizer.Message{{Role: "user", Content: content}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	return c.Tok.Encode(text)
}

// got is what a client received.
type got struct {
	text                      string
	prompt, completion, total int
	finishReason              string
	streamedUsage             bool
}

func (g got) check(t *testing.T, name string, w want) {
	t.Helper()
	if g.text != w.text || g.finishReason != w.finishReason {
		t.Errorf("%s: %q, finish %q; the session's ids decode to %q, finish %q", name, g.text, g.finishReason, w.text, w.finishReason)
	}
	if g.prompt != w.prompt || g.completion != w.n || g.total != w.prompt+w.n {
		t.Errorf("%s: usage %d + %d = %d, want %d + %d", name, g.prompt, g.completion, g.total, w.prompt, w.n)
	}
}

const maxTokens = 5

func chatRequest(content string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       openai.ChatModel(modelID),
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

func completionRequest(prompt string) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel(modelID),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

func chat(ctx context.Context, cl openai.Client, content string) (got, error) {
	r, err := cl.Chat.Completions.New(ctx, chatRequest(content))
	if err != nil {
		return got{}, err
	}
	if len(r.Choices) != 1 || r.Object != "chat.completion" || r.Model != modelID || !strings.HasPrefix(r.ID, "chatcmpl-") || r.Choices[0].Message.Role != "assistant" {
		return got{}, fmt.Errorf("a chat completion of the wrong shape: %s", r.RawJSON())
	}
	return got{text: r.Choices[0].Message.Content, finishReason: r.Choices[0].FinishReason,
		prompt: int(r.Usage.PromptTokens), completion: int(r.Usage.CompletionTokens), total: int(r.Usage.TotalTokens)}, nil
}

func chatStream(ctx context.Context, cl openai.Client, content string) (got, error) {
	p := chatRequest(content)
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	s := cl.Chat.Completions.NewStreaming(ctx, p)
	var g got
	var b strings.Builder
	role := false
	for s.Next() {
		c := s.Current()
		if c.Object != "chat.completion.chunk" || c.Model != modelID {
			return g, fmt.Errorf("a chunk of the wrong shape: %s", c.RawJSON())
		}
		if len(c.Choices) == 0 {
			g.streamedUsage = true
			g.prompt, g.completion, g.total = int(c.Usage.PromptTokens), int(c.Usage.CompletionTokens), int(c.Usage.TotalTokens)
			continue
		}
		if g.streamedUsage {
			return g, fmt.Errorf("a chunk after the usage: %s", c.RawJSON())
		}
		role = role || c.Choices[0].Delta.Role == "assistant"
		b.WriteString(c.Choices[0].Delta.Content)
		if c.Choices[0].FinishReason != "" {
			g.finishReason = c.Choices[0].FinishReason
		}
	}
	if err := s.Err(); err != nil {
		return g, err
	}
	if !role || !g.streamedUsage {
		return g, fmt.Errorf("the stream had no role (%v) or no usage (%v)", role, g.streamedUsage)
	}
	g.text = b.String()
	return g, nil
}

func complete(ctx context.Context, cl openai.Client, prompt string) (got, error) {
	r, err := cl.Completions.New(ctx, completionRequest(prompt))
	if err != nil {
		return got{}, err
	}
	if len(r.Choices) != 1 || r.Object != "text_completion" || r.Model != modelID || !strings.HasPrefix(r.ID, "cmpl-") {
		return got{}, fmt.Errorf("a completion of the wrong shape: %s", r.RawJSON())
	}
	return got{text: r.Choices[0].Text, finishReason: string(r.Choices[0].FinishReason),
		prompt: int(r.Usage.PromptTokens), completion: int(r.Usage.CompletionTokens), total: int(r.Usage.TotalTokens)}, nil
}

func completeStream(ctx context.Context, cl openai.Client, prompt string) (got, error) {
	p := completionRequest(prompt)
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	s := cl.Completions.NewStreaming(ctx, p)
	var g got
	var b strings.Builder
	for s.Next() {
		c := s.Current()
		if c.Object != "text_completion" {
			return g, fmt.Errorf("a chunk of the wrong shape: %s", c.RawJSON())
		}
		if len(c.Choices) == 0 {
			g.streamedUsage = true
			g.prompt, g.completion, g.total = int(c.Usage.PromptTokens), int(c.Usage.CompletionTokens), int(c.Usage.TotalTokens)
			continue
		}
		b.WriteString(c.Choices[0].Text)
		if c.Choices[0].FinishReason != "" {
			g.finishReason = string(c.Choices[0].FinishReason)
		}
	}
	if err := s.Err(); err != nil {
		return g, err
	}
	if !g.streamedUsage {
		return g, fmt.Errorf("the stream had no usage")
	}
	g.text = b.String()
	return g, nil
}

// TestOpenAIClients: 8 clients of the official Go SDK at once, over chat
// and completions, streamed and not, on two prompts each: each gets, as
// text, finish reason and usage, what the model's own session generates
// greedily on the same prompt, decoded by the tokenizer. Then stop
// sequences, given as a string and as a list: the text ends where the
// first one begins. The embedded model's golden prompt, given as token
// ids, gets the text of its golden path. And /v1/models lists the model.
func TestOpenAIClients(t *testing.T) {
	c, gen := testEngine(t, 64, 8, 8)
	ts := serve(t, c, gen)
	cl := client(ts)
	ctx := context.Background()

	s := c.Session(t)
	chats, texts := []string{"Hello!", "What is 2+2?"}, []string{"The quick brown fox", "Once upon a time"}
	wants := map[string]want{}
	for _, m := range chats {
		wants["chat "+m] = reference(t, c, s, chatPrompt(t, c, m), maxTokens)
	}
	for _, p := range texts {
		wants["text "+p] = reference(t, c, s, c.Tok.Encode(p), maxTokens)
	}

	type call struct {
		name string
		key  string
		run  func() (got, error)
	}
	var calls []call
	for _, m := range chats {
		calls = append(calls,
			call{"chat " + m, "chat " + m, func() (got, error) { return chat(ctx, cl, m) }},
			call{"streamed chat " + m, "chat " + m, func() (got, error) { return chatStream(ctx, cl, m) }})
	}
	for _, p := range texts {
		calls = append(calls,
			call{"completion " + p, "text " + p, func() (got, error) { return complete(ctx, cl, p) }},
			call{"streamed completion " + p, "text " + p, func() (got, error) { return completeStream(ctx, cl, p) }})
	}
	results := make([]got, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, cc := range calls {
		wg.Go(func() { results[i], errs[i] = cc.run() })
	}
	wg.Wait()
	for i, cc := range calls {
		if errs[i] != nil {
			t.Errorf("%s: %v", cc.name, errs[i])
			continue
		}
		results[i].check(t, cc.name, wants[cc.key])
	}

	// Stop sequences from the middle of a text the model generates.
	w := wants["chat Hello!"]
	r := []rune(w.text)
	if len(r) < 4 {
		t.Fatalf("the reference text %q is too short to take a stop sequence from", w.text)
	}
	stop := string(r[len(r)/2 : len(r)/2+2])
	cut := w.text[:strings.Index(w.text, stop)]
	p := chatRequest("Hello!")
	p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(stop)}
	res, err := cl.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != cut || res.Choices[0].FinishReason != "stop" || res.Usage.CompletionTokens >= int64(w.n) {
		t.Errorf("stop %q: %q, finish %q after %d tokens; want %q, stop, before %d tokens", stop, res.Choices[0].Message.Content, res.Choices[0].FinishReason, res.Usage.CompletionTokens, cut, w.n)
	}
	// Streamed, with the stop in a list: the same text.
	p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"\x00never", stop}}
	st := cl.Chat.Completions.NewStreaming(ctx, p)
	var b strings.Builder
	finish := ""
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 {
			b.WriteString(ch.Choices[0].Delta.Content)
			finish += ch.Choices[0].FinishReason
		}
	}
	if err := st.Err(); err != nil || b.String() != cut || finish != "stop" {
		t.Errorf("streamed, stops [\\x00never %q]: %q, finish %q, %v; want %q, stop", stop, b.String(), finish, err, cut)
	}

	// A prompt of token ids: the golden prompt of the embedded model, whose
	// greedy continuation is the float64 truth's path.
	golden, err := tiny.Prompts()
	if err != nil {
		t.Fatal(err)
	}
	g := golden[0]
	ids := make([]int64, len(g.Prompt))
	for i, id := range g.Prompt {
		ids[i] = int64(id)
	}
	goldenText, err := c.Tok.Decode(g.Tokens, true)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := cl.Completions.New(ctx, openai.CompletionNewParams{
		Model:       openai.CompletionNewParamsModel(modelID),
		Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids},
		MaxTokens:   openai.Int(int64(len(g.Tokens))),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Choices[0].Text != goldenText || cr.Usage.PromptTokens != int64(len(g.Prompt)) || cr.Usage.CompletionTokens != int64(len(g.Tokens)) {
		t.Errorf("the golden prompt %v: %q after %d + %d tokens; the golden path %v decodes to %q", g.Prompt, cr.Choices[0].Text, cr.Usage.PromptTokens, cr.Usage.CompletionTokens, g.Tokens, goldenText)
	}

	models, err := cl.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != modelID || models.Data[0].Object != "model" {
		t.Errorf("/v1/models: %s", models.RawJSON())
	}
}
