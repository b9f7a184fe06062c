package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// A ChatTemplate renders a conversation into a prompt with a model's Jinja
// chat template, as transformers' apply_chat_template(messages,
// tokenize=False) does: the template sees messages, tools,
// add_generation_prompt, enable_thinking and the tokenizer's special tokens
// (bos_token, eos_token, pad_token, unk_token), with Jinja's trim_blocks
// and lstrip_blocks on. It is safe for concurrent use.
//
// The Jinja engine is github.com/ardanlabs/jinja, checked against Jinja2
// on Qwen3's and Qwen3.5's templates. Where it is known to print a value
// differently from Python, rendering fails with [ErrTemplate] rather than
// give a different prompt:
//   - a JSON number with a fraction or an exponent whose Python form (1.0,
//     1234567.0) differs from Go's shortest form (1, 1.234567e+06);
//   - U+2028 or U+2029 in a string of the tools or of a message's
//     tool_calls, which the templates write with tojson: the engine
//     escapes them as \u2028 and \u2029, Python's json.dumps does not.
//
// Differences that remain: a null printed as text ({{ x }}, x|string,
// 'a' ~ x) is empty where Python writes None (Qwen3.5's template prints a
// tool call's arguments with |string), and a string holding a single quote
// inside a printed list or dict is quoted with single quotes where Python
// uses double ones.
type ChatTemplate struct {
	tmpl   *jinja.Template
	tokens map[string]jinja.Value
}

// ChatOptions are the rendering's variables besides the messages.
type ChatOptions struct {
	// AddGenerationPrompt ends the prompt with the assistant's turn opened
	// (add_generation_prompt).
	AddGenerationPrompt bool
	// DisableThinking passes enable_thinking=false (true otherwise): Qwen3
	// then opens the turn with an empty <think></think>.
	DisableThinking bool
	// Tools is a JSON array of tool schemas (tools), or nil for none.
	Tools json.RawMessage
}

// A Message is one turn of a conversation. Conversations with more than a
// role and a text (tool calls, reasoning, content lists) are rendered from
// their JSON with [ChatTemplate.RenderJSON].
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// tokenizerConfig is the part of tokenizer_config.json a chat template
// needs.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	PAD          json.RawMessage `json:"pad_token"`
	UNK          json.RawMessage `json:"unk_token"`
}

// LoadChatTemplate reads the chat template of the model in dir: the file
// chat_template.jinja when there is one (as transformers saves it), else
// tokenizer_config.json's chat_template, else the chat_template of a
// chat_template.json (a multimodal processor's file); the special tokens
// are tokenizer_config.json's.
func LoadChatTemplate(dir string) (*ChatTemplate, error) {
	config, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	source, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	switch {
	case err == nil:
		return ParseChatTemplate(config, string(source))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	t, err := ParseChatTemplate(config, "")
	if !errors.Is(err, errNoTemplate) {
		return t, err
	}
	processor, perr := os.ReadFile(filepath.Join(dir, "chat_template.json"))
	if perr != nil {
		return nil, err
	}
	var p struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(processor, &p); err != nil || p.ChatTemplate == "" {
		return nil, fmt.Errorf("%w: chat_template.json has no chat_template string", ErrTemplate)
	}
	return ParseChatTemplate(config, p.ChatTemplate)
}

// errNoTemplate reports a tokenizer_config.json without a chat_template.
var errNoTemplate = fmt.Errorf("%w: tokenizer_config.json has no chat_template", ErrTemplate)

// ParseChatTemplate compiles the chat template of a tokenizer_config.json,
// or source instead of its chat_template when source is not empty.
func ParseChatTemplate(config []byte, source string) (*ChatTemplate, error) {
	var c tokenizerConfig
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("%w: tokenizer_config.json: %v", ErrFormat, err)
	}
	if source == "" {
		if isNull(c.ChatTemplate) {
			return nil, errNoTemplate
		}
		if err := json.Unmarshal(c.ChatTemplate, &source); err != nil {
			return nil, fmt.Errorf("%w: tokenizer_config.json's chat_template is not a string (named templates)", ErrUnsupported)
		}
	}
	tmpl, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	t := &ChatTemplate{tmpl: tmpl, tokens: map[string]jinja.Value{}}
	for name, raw := range map[string]json.RawMessage{"bos_token": c.BOS, "eos_token": c.EOS, "pad_token": c.PAD, "unk_token": c.UNK} {
		if tok, ok := specialToken(raw); ok {
			t.tokens[name] = jinja.NewString(tok)
		}
	}
	return t, nil
}

// specialToken reads a special token written as a string or as an added
// token's object.
func specialToken(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s, true
	}
	var obj struct{ Content string }
	if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
		return obj.Content, true
	}
	return "", false
}

// Render renders messages of a role and a text each.
func (t *ChatTemplate) Render(messages []Message, opt ChatOptions) (string, error) {
	raw, err := json.Marshal(messages)
	if err != nil {
		return "", err
	}
	return t.RenderJSON(raw, opt)
}

// RenderJSON renders messages given as a JSON array of objects, OpenAI's
// and transformers' form ({"role": ..., "content": ..., "tool_calls": ...,
// "reasoning_content": ...}); objects keep the order of their keys.
func (t *ChatTemplate) RenderJSON(messages json.RawMessage, opt ChatOptions) (string, error) {
	vars := make(map[string]jinja.Value, len(t.tokens)+4)
	for k, v := range t.tokens {
		vars[k] = v
	}
	msgs, err := jsonValue(messages, false)
	if err != nil {
		return "", fmt.Errorf("%w: messages: %v", ErrTemplate, err)
	}
	if !msgs.IsList() {
		return "", fmt.Errorf("%w: messages are not a JSON array", ErrTemplate)
	}
	vars["messages"] = msgs
	vars["tools"] = jinja.None()
	if !isNull(opt.Tools) {
		tools, err := jsonValue(opt.Tools, true)
		if err != nil {
			return "", fmt.Errorf("%w: tools: %v", ErrTemplate, err)
		}
		vars["tools"] = tools
	}
	vars["add_generation_prompt"] = jinja.NewBool(opt.AddGenerationPrompt)
	vars["enable_thinking"] = jinja.NewBool(!opt.DisableThinking)
	out, err := t.tmpl.RenderValues(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return out, nil
}

// jsonValue converts JSON to template values as Python's json.loads
// would: objects keep their key order, numbers without a fraction or an
// exponent are integers. With toJSON, or below a "tool_calls" key, the
// values are ones that templates write with tojson.
func jsonValue(data []byte, toJSON bool) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, toJSON)
	if err != nil {
		return v, err
	}
	if _, err := d.Token(); err == nil {
		return v, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, toJSON bool) (jinja.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return jinja.None(), err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			var items []jinja.Value
			for d.More() {
				item, err := decodeValue(d, toJSON)
				if err != nil {
					return item, err
				}
				items = append(items, item)
			}
			_, err := d.Token()
			return jinja.NewList(items), err
		}
		obj := jinja.NewDict()
		for d.More() {
			key, err := d.Token()
			if err != nil {
				return obj, err
			}
			val, err := decodeValue(d, toJSON || key == "tool_calls")
			if err != nil {
				return val, err
			}
			obj.AsDict().Set(key.(string), val)
		}
		_, err := d.Token()
		return obj, err
	case string:
		if toJSON && strings.ContainsAny(v, "\u2028\u2029") {
			return jinja.None(), fmt.Errorf("string %q holds U+2028 or U+2029, which tojson would escape unlike Python", v)
		}
		return jinja.NewString(v), nil
	case bool:
		return jinja.NewBool(v), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		return numberValue(string(v))
	}
	return jinja.None(), fmt.Errorf("unexpected JSON token %v", tok)
}

// numberValue converts a JSON number: an integer if it has neither a
// fraction nor an exponent, else a float, refused when the engine would
// print it differently from Python's repr.
func numberValue(s string) (jinja.Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return jinja.None(), fmt.Errorf("integer %s does not fit 64 bits", s)
		}
		return jinja.NewInt(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return jinja.None(), fmt.Errorf("number %s: %v", s, err)
	}
	if goForm, pyForm := strconv.FormatFloat(f, 'g', -1, 64), pythonFloat(f); goForm != pyForm {
		return jinja.None(), fmt.Errorf("number %s would print as %s, not as Python's %s", s, goForm, pyForm)
	}
	return jinja.NewFloat(f), nil
}

// pythonFloat formats f as Python's repr does: the shortest digits that
// read back as f, positional with at least one decimal when the decimal
// exponent is in [-4, 16), else scientific.
func pythonFloat(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
