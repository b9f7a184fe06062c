package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestServe runs puremetal serve on the embedded model and a free
// loopback port: /health answers, a chat completion comes back in
// OpenAI's shape, and the end of the context (SIGINT or SIGTERM in the
// command) shuts it down cleanly. Bad flags are a usage error.
func TestServe(t *testing.T) {
	if err := testdevice.EmulatedOpens(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	addr := make(chan string, 1)
	done := make(chan error, 1)
	f := serveFlags{addr: "127.0.0.1:0", backend: "emu", maxLen: 64, chunk: 64, queue: 2, shutdown: 5 * time.Second}
	go func() { done <- serve(ctx, f, &stderr, func(a string) { addr <- a }) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve ended before listening: %v: %s", err, stderr.String())
	}

	resp, err := http.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health: %v, %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"qwen3_dense_bf16","max_tokens":2,"temperature":0,"messages":[{"role":"user","content":"Hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Object  string
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || r.Object != "chat.completion" || len(r.Choices) != 1 || r.Usage.CompletionTokens < 1 || r.Usage.CompletionTokens > 2 {
		t.Errorf("a chat completion: %d %+v %v", resp.StatusCode, r, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not shut down")
	}
	for _, want := range []string{"embedded tiny", "serving \"qwen3_dense_bf16\" on http://127.0.0.1:", "shut down"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr says no %q: %s", want, stderr.String())
		}
	}
	if status, _, _ := puremetal("", "serve", "-queue", "-1"); status != 2 {
		t.Errorf("-queue -1: status %d, want 2", status)
	}
}
