package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/puremetal/puremetal/internal/tokentest"
)

func qwen3Chat(tb testing.TB) *ChatTemplate {
	tb.Helper()
	c, err := LoadChatTemplate(tokentest.Dir(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestGoldenChat renders every golden conversation and encodes the prompt:
// text and ids both as HF's apply_chat_template gives them.
func TestGoldenChat(t *testing.T) {
	tok, chat := qwen3(t), qwen3Chat(t)
	for i, c := range golden(t).Chat {
		text, err := chat.RenderJSON(c.Messages, ChatOptions{AddGenerationPrompt: true, DisableThinking: !c.EnableThinking})
		if err != nil {
			t.Fatalf("chat case %d: %v", i, err)
		}
		if text != c.Text {
			t.Errorf("chat case %d (thinking %v):\n got %q\nwant %q", i, c.EnableThinking, text, c.Text)
		}
		if ids := tok.Encode(text); !slices.Equal(ids, c.IDs) {
			t.Errorf("chat case %d ids:\n got %v\nwant %v", i, ids, c.IDs)
		}
	}
}

// TestChatJinja2 renders conversations with tools, tool calls and
// reasoning that the golden set lacks, against Jinja2's rendering with
// transformers' settings (chat_jinja2.py made the file).
func TestChatJinja2(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(tokentest.Dir(t), "chat_jinja2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Cases []struct {
			Name                string          `json:"name"`
			Messages            json.RawMessage `json:"messages"`
			Tools               json.RawMessage `json:"tools"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
			EnableThinking      bool            `json:"enable_thinking"`
			Text                string          `json:"text"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Cases) == 0 {
		t.Fatal("chat_jinja2.json has no cases")
	}
	chat := qwen3Chat(t)
	for _, c := range set.Cases {
		opt := ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, DisableThinking: !c.EnableThinking, Tools: c.Tools}
		got, err := chat.RenderJSON(c.Messages, opt)
		if err != nil || got != c.Text {
			t.Errorf("%s:\n got %q, %v\nwant %q", c.Name, got, err, c.Text)
		}
	}
}

func TestChatRender(t *testing.T) {
	chat := qwen3Chat(t)
	got, err := chat.Render([]Message{{"system", "S"}, {"user", "U"}}, ChatOptions{AddGenerationPrompt: true})
	want := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

// TestChatErrors: input the template or the engine cannot render as
// Python would is an ErrTemplate naming the problem.
func TestChatErrors(t *testing.T) {
	chat := qwen3Chat(t)
	for _, c := range []struct{ name, messages, tools string }{
		{"not an array", `{"role": "user"}`, ""},
		{"bad JSON", `[{"role": "user", "content": }]`, ""},
		{"trailing data", `[] []`, ""},
		{"integral float", `[{"role": "user", "content": "x"}]`, `[{"n": 1.0}]`},
		{"float Go writes with an exponent", `[{"role": "user", "content": "x"}]`, `[{"n": 1234567.5}]`},
		{"integer over 64 bits", `[{"role": "user", "content": "x"}]`, `[{"n": 123456789012345678901}]`},
		{"content not a string", `[{"role": "user", "content": 3}]`, ""},
		{"U+2028 in tools", `[{"role": "user", "content": "x"}]`, `[{"description": "a\u2028b"}]`},
		{"U+2029 in tool call arguments", `[{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {"s": "\u2029"}}]}]`, ""},
	} {
		_, err := chat.RenderJSON(json.RawMessage(c.messages), ChatOptions{Tools: json.RawMessage(c.tools)})
		if !errors.Is(err, ErrTemplate) {
			t.Errorf("%s: got %v, want ErrTemplate", c.name, err)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	if _, err := ParseChatTemplate([]byte(`{"chat_template": "{% if %}"}`), ""); !errors.Is(err, ErrTemplate) {
		t.Errorf("bad template: got %v, want ErrTemplate", err)
	}
	if _, err := ParseChatTemplate([]byte(`{"eos_token": "x"}`), ""); !errors.Is(err, ErrTemplate) {
		t.Errorf("no template: got %v, want ErrTemplate", err)
	}
	if _, err := ParseChatTemplate([]byte(`{"chat_template": [{"name": "default", "template": "x"}]}`), ""); !errors.Is(err, ErrUnsupported) {
		t.Errorf("named templates: got %v, want ErrUnsupported", err)
	}
}

func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", -2: "-2.0", 0.5: "0.5", 1e-4: "0.0001", 1e-5: "1e-05", 1234567: "1234567.0",
		1e15: "1000000000000000.0", 1e16: "1e+16", 1.5e300: "1.5e+300", 0.1: "0.1", 0: "0.0",
	} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

// TestChatTemplateFiles: chat_template.jinja comes first, then
// tokenizer_config.json's chat_template, then chat_template.json's; the
// special tokens are tokenizer_config.json's.
func TestChatTemplateFiles(t *testing.T) {
	const withTemplate = `{"chat_template": "config {{ eos_token }}", "eos_token": {"content": "<|im_end|>"}, "bos_token": null}`
	const withoutTemplate = `{"eos_token": "<|im_end|>"}`
	const jinjaFile = "jinja {{ messages[0].content }}{{ eos_token }}{{ bos_token is defined }}"
	const processorFile = `{"chat_template": "processor {{ eos_token }}"}`
	for _, c := range []struct {
		config, jinja, processor string
		want                     string // "": ErrTemplate
	}{
		{withTemplate, jinjaFile, processorFile, "jinja hi<|im_end|>False"},
		{withTemplate, "", processorFile, "config <|im_end|>"},
		{withoutTemplate, "", processorFile, "processor <|im_end|>"},
		{withoutTemplate, "", "", ""},
		{withoutTemplate, "", `{"chat_template": 3}`, ""},
	} {
		dir := t.TempDir()
		for name, text := range map[string]string{"tokenizer_config.json": c.config, "chat_template.jinja": c.jinja, "chat_template.json": c.processor} {
			if text == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		chat, err := LoadChatTemplate(dir)
		if c.want == "" {
			if !errors.Is(err, ErrTemplate) {
				t.Errorf("%+v: got %v, want ErrTemplate", c, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got, err := chat.Render([]Message{{"user", "hi"}}, ChatOptions{})
		if err != nil || got != c.want {
			t.Errorf("%+v: got %q, %v; want %q", c, got, err, c.want)
		}
	}
}
