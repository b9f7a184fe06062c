package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/puremetal/puremetal/tokenizer"
)

const tokenizeSynopsis = `tokenize -model DIR [-json] [-decode [-skip-special]] [-chat [-thinking=false] [-tools FILE]]

Reads stdin and writes stdout:
  (default)  text (all of stdin, byte for byte) -> ids separated by spaces
  -json      a JSON array of strings -> a JSON array of id arrays
  -decode    ids separated by white space -> text
             (-json: a JSON array of id arrays -> a JSON array of strings)
  -chat      a JSON array of messages -> the ids of the chat template's
             prompt, with the assistant's turn opened (-json: a JSON array)

Flags:`

func runTokenize(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", tokenizeSynopsis, stderr)
	model := fs.String("model", "", "model `folder` with tokenizer.json (and tokenizer_config.json for -chat); required")
	asJSON := fs.Bool("json", false, "read and write JSON arrays")
	decode := fs.Bool("decode", false, "decode ids to text")
	skipSpecial := fs.Bool("skip-special", false, "with -decode, leave special tokens out")
	chat := fs.Bool("chat", false, "render a JSON array of messages with the chat template, then encode")
	thinking := fs.Bool("thinking", true, "with -chat, enable_thinking")
	tools := fs.String("tools", "", "with -chat, a `file` holding a JSON array of tool schemas")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *model == "":
		return fmt.Errorf("%w: -model is required", errUsage)
	case *decode && *chat:
		return fmt.Errorf("%w: -decode and -chat exclude each other", errUsage)
	case *skipSpecial && !*decode:
		return fmt.Errorf("%w: -skip-special needs -decode", errUsage)
	case (*tools != "" || !*thinking) && !*chat:
		return fmt.Errorf("%w: -tools and -thinking need -chat", errUsage)
	}
	tok, err := tokenizer.Load(*model)
	if err != nil {
		return err
	}
	input, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	switch {
	case *chat:
		err = tokenizeChat(out, tok, *model, input, *tools, *thinking, *asJSON)
	case *decode && *asJSON:
		err = decodeJSON(out, tok, input, *skipSpecial)
	case *decode:
		err = decodeText(out, tok, input, *skipSpecial)
	case *asJSON:
		err = encodeJSON(out, tok, input)
	default:
		writeIDs(out, tok.Encode(string(input)))
	}
	if err != nil {
		return err
	}
	return out.Flush()
}

// writeIDs writes ids separated by spaces and a newline.
func writeIDs(w *bufio.Writer, ids []int32) {
	var buf []byte
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ' ')
		}
		buf = strconv.AppendInt(buf, int64(id), 10)
	}
	w.Write(append(buf, '\n'))
}

// writeJSON writes v as JSON on one line, without HTML escapes.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func encodeJSON(w *bufio.Writer, tok *tokenizer.Tokenizer, input []byte) error {
	var texts []string
	if err := json.Unmarshal(input, &texts); err != nil {
		return fmt.Errorf("stdin is not a JSON array of strings: %w", err)
	}
	ids := make([][]int32, len(texts))
	for i, t := range texts {
		ids[i] = tok.Encode(t)
		if ids[i] == nil {
			ids[i] = []int32{}
		}
	}
	return writeJSON(w, ids)
}

func decodeJSON(w *bufio.Writer, tok *tokenizer.Tokenizer, input []byte, skipSpecial bool) error {
	var ids [][]int32
	if err := json.Unmarshal(input, &ids); err != nil {
		return fmt.Errorf("stdin is not a JSON array of id arrays: %w", err)
	}
	texts := make([]string, len(ids))
	for i, seq := range ids {
		var err error
		if texts[i], err = tok.Decode(seq, skipSpecial); err != nil {
			return fmt.Errorf("sequence %d: %w", i, err)
		}
	}
	return writeJSON(w, texts)
}

func decodeText(w *bufio.Writer, tok *tokenizer.Tokenizer, input []byte, skipSpecial bool) error {
	fields := strings.Fields(string(input))
	ids := make([]int32, len(fields))
	for i, f := range fields {
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return fmt.Errorf("stdin word %d, %q, is not a token id", i+1, f)
		}
		ids[i] = int32(id)
	}
	text, err := tok.Decode(ids, skipSpecial)
	if err != nil {
		return err
	}
	_, err = w.WriteString(text)
	return err
}

func tokenizeChat(w *bufio.Writer, tok *tokenizer.Tokenizer, model string, input []byte, toolsFile string, thinking, asJSON bool) error {
	tmpl, err := tokenizer.LoadChatTemplate(model)
	if err != nil {
		return err
	}
	opt := tokenizer.ChatOptions{AddGenerationPrompt: true, DisableThinking: !thinking}
	if toolsFile != "" {
		if opt.Tools, err = os.ReadFile(toolsFile); err != nil {
			return err
		}
	}
	prompt, err := tmpl.RenderJSON(input, opt)
	if err != nil {
		return err
	}
	ids := tok.Encode(prompt)
	if asJSON {
		return writeJSON(w, ids)
	}
	writeIDs(w, ids)
	return nil
}
