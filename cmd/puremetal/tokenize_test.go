package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/tokentest"
	"github.com/puremetal/puremetal/tokenizer"
)

// qwen3Model returns a model folder holding Qwen3's tokenizer.json and
// tokenizer_config.json.
func qwen3Model(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tokentest.TokenizerJSON(t), 0o644); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(tokentest.Dir(t), "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// puremetal runs a command line with stdin and returns its exit status
// and output.
func puremetal(stdin string, args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = run(args, strings.NewReader(stdin), &out, &errOut)
	return status, out.String(), errOut.String()
}

// TestTokenize runs every golden case through the command's modes.
func TestTokenize(t *testing.T) {
	model := qwen3Model(t)
	g := tokentest.LoadGolden(t)

	var texts, decoded []string
	var ids [][]int32
	for _, c := range g.Encode {
		texts, ids, decoded = append(texts, c.Text), append(ids, c.IDs), append(decoded, c.Decoded)
	}
	in, _ := json.Marshal(texts)
	status, out, errOut := puremetal(string(in), "tokenize", "-model", model, "-json")
	var gotIDs [][]int32
	if status != 0 || json.Unmarshal([]byte(out), &gotIDs) != nil || !slices.EqualFunc(gotIDs, ids, slices.Equal) {
		t.Errorf("-json: status %d, stderr %q, output %.200q", status, errOut, out)
	}

	in, _ = json.Marshal(ids)
	status, out, errOut = puremetal(string(in), "tokenize", "-model", model, "-decode", "-json")
	var gotTexts []string
	if status != 0 || json.Unmarshal([]byte(out), &gotTexts) != nil || !slices.Equal(gotTexts, decoded) {
		t.Errorf("-decode -json: status %d, stderr %q, output %.200q", status, errOut, out)
	}

	// Plain text and ids, one case of each.
	c := g.Encode[len(g.Encode)/2]
	status, out, errOut = puremetal(c.Text, "tokenize", "-model", model)
	if want := idLine(c.IDs); status != 0 || out != want {
		t.Errorf("text %q: status %d, stderr %q, got %q, want %q", c.Text, status, errOut, out, want)
	}
	status, out, errOut = puremetal(idLine(c.IDs), "tokenize", "-model", model, "-decode")
	if status != 0 || out != c.Decoded {
		t.Errorf("-decode %v: status %d, stderr %q, got %q, want %q", c.IDs, status, errOut, out, c.Decoded)
	}

	ids, decoded = nil, nil
	for _, c := range g.Decode {
		ids, decoded = append(ids, c.IDs), append(decoded, c.TextSkipSpecial)
	}
	in, _ = json.Marshal(ids)
	status, out, errOut = puremetal(string(in), "tokenize", "-model", model, "-decode", "-json", "-skip-special")
	gotTexts = nil
	if status != 0 || json.Unmarshal([]byte(out), &gotTexts) != nil || !slices.Equal(gotTexts, decoded) {
		t.Errorf("-decode -json -skip-special: status %d, stderr %q, output %.200q", status, errOut, out)
	}

	// The last conversation, with and without thinking (the tokenizer's
	// tests render all of them).
	for _, c := range g.Chat[len(g.Chat)-2:] {
		status, out, errOut = puremetal(string(c.Messages), "tokenize", "-model", model, "-chat", "-thinking="+strconv.FormatBool(c.EnableThinking))
		if want := idLine(c.IDs); status != 0 || out != want {
			t.Errorf("-chat %s (thinking %v): status %d, stderr %q, got %q, want %q", c.Messages, c.EnableThinking, status, errOut, out, want)
		}
	}
}

func idLine(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, " ") + "\n"
}

// TestUsage: a wrong command line exits with 2, a failing command with 1,
// each with a message.
func TestUsage(t *testing.T) {
	tiny := tokentest.TinyDir(t)
	for _, c := range []struct {
		args   []string
		stdin  string
		status int
	}{
		{nil, "", 2},
		{[]string{"frobnicate"}, "", 2},
		{[]string{"tokenize"}, "", 2},
		{[]string{"tokenize", "-model", tiny, "-bogus"}, "", 2},
		{[]string{"tokenize", "-model", tiny, "extra"}, "", 2},
		{[]string{"tokenize", "-model", tiny, "-decode", "-chat"}, "", 2},
		{[]string{"tokenize", "-model", tiny, "-thinking=false"}, "", 2},
		{[]string{"tokenize", "-model", tiny, "-skip-special"}, "", 2},
		{[]string{"tokenize", "-model", t.TempDir()}, "", 1},
		{[]string{"tokenize", "-model", tiny, "-decode"}, "1 x 2", 1},
		{[]string{"tokenize", "-model", tiny, "-decode"}, "999999", 1},
		{[]string{"tokenize", "-model", tiny, "-json"}, `{"a": 1}`, 1},
		{[]string{"tokenize", "-model", tiny, "-chat"}, `[{"role": "user"`, 1},
		{[]string{"help"}, "", 0},
		{[]string{"help", "tokenize"}, "", 0},
	} {
		status, _, errOut := puremetal(c.stdin, c.args...)
		if status != c.status || (status != 0 && errOut == "") {
			t.Errorf("puremetal %q: status %d (want %d), stderr %q", c.args, status, c.status, errOut)
		}
	}
}

// TestTokenizeChatJSON: -chat -json with tools writes the ids of the
// prompt that the tokenizer package renders and encodes.
func TestTokenizeChatJSON(t *testing.T) {
	model := tokentest.TinyDir(t)
	tools := filepath.Join(t.TempDir(), "tools.json")
	const toolsJSON = `[{"type": "function", "function": {"name": "now", "parameters": {}}}]`
	if err := os.WriteFile(tools, []byte(toolsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	const messages = `[{"role": "user", "content": "What time is it?"}]`
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := tokenizer.LoadChatTemplate(model)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := chat.RenderJSON(json.RawMessage(messages), tokenizer.ChatOptions{
		AddGenerationPrompt: true, DisableThinking: true, Tools: json.RawMessage(toolsJSON)})
	if err != nil {
		t.Fatal(err)
	}
	status, out, errOut := puremetal(messages, "tokenize", "-model", model, "-chat", "-json", "-thinking=false", "-tools", tools)
	var ids []int32
	if status != 0 || json.Unmarshal([]byte(out), &ids) != nil || !slices.Equal(ids, tok.Encode(prompt)) {
		t.Errorf("status %d, stderr %q, output %q; want the ids of %q", status, errOut, out, prompt)
	}
}
