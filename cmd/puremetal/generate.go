package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/tokenizer"
)

// generateFlags are generate's flags.
type generateFlags struct {
	model, prompt, ids, backend string
	maxTokens, chunk, maxLen    int
	temperature, topP, minP     float64
	repetitionPenalty           float64
	topK                        int
	seed                        uint64
	ignoreEOS, idsOut, chat     bool
}

func runGenerate(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f generateFlags
	fs.StringVar(&f.model, "model", "", "checkpoint folder (config.json, *.safetensors, tokenizer.json); none: the embedded tiny model of random weights, checked against its golden path")
	fs.StringVar(&f.prompt, "prompt", "", "prompt text (through the tokenizer)")
	fs.StringVar(&f.ids, "ids", "", "prompt token ids, comma-separated, instead of -prompt")
	fs.IntVar(&f.maxTokens, "max-tokens", 64, "most tokens to generate")
	fs.Float64Var(&f.temperature, "temperature", 0, "sampling temperature; 0 is greedy")
	fs.IntVar(&f.topK, "top-k", 0, "keep the k most likely tokens (0: off)")
	fs.Float64Var(&f.topP, "top-p", 1, "nucleus sampling threshold (needs -top-k below 1)")
	fs.Float64Var(&f.minP, "min-p", 0, "keep tokens at least this fraction as likely as the best")
	fs.Uint64Var(&f.seed, "seed", 0, "sampling seed")
	fs.Float64Var(&f.repetitionPenalty, "repetition-penalty", 1, "HF's repetition_penalty over the prompt's and the generated tokens (1: off)")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "do not stop at the config's eos tokens")
	fs.BoolVar(&f.idsOut, "ids-out", false, "end with a line 'tokens: <id> <id> ...' of the generated ids")
	fs.BoolVar(&f.chat, "chat", false, "put the prompt through the model's chat template as a user turn")
	fs.StringVar(&f.backend, "backend", "auto", "auto (metal where there is Metal, else emu), metal or emu")
	fs.IntVar(&f.chunk, "chunk", 256, "prompt tokens per prefill pass")
	fs.IntVar(&f.maxLen, "max-len", 0, "positions the cache holds (0: the prompt and -max-tokens)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.prompt != "" && f.ids != "" {
		return fmt.Errorf("%w: -prompt and -ids both given", errUsage)
	}
	if f.maxTokens < 1 {
		return fmt.Errorf("%w: -max-tokens %d, want at least 1", errUsage, f.maxTokens)
	}
	return generate(f, stdout, stderr)
}

// embeddedModel writes the embedded tiny checkpoint into a new temporary
// folder, which the caller removes, and says so on stderr.
func embeddedModel(stderr io.Writer) (string, error) {
	dir, err := os.MkdirTemp("", "puremetal-tiny")
	if err != nil {
		return "", err
	}
	if err := tiny.WriteDir(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	fmt.Fprintf(stderr, "no -model: the embedded tiny %s checkpoint (random weights: its text means nothing)\n", tiny.Name)
	return dir, nil
}

// openBackend opens the device backend names and says which it opened.
func openBackend(backend string, stderr io.Writer) (*mtl.Device, string, error) {
	switch backend {
	case "metal":
		d, err := mtl.CreateSystemDefaultDevice()
		return d, "metal", err
	case "emu":
		d, err := emu.NewDevice()
		return d, "emu", err
	case "auto":
		if d, err := mtl.CreateSystemDefaultDevice(); err == nil {
			return d, "metal", nil
		} else {
			fmt.Fprintf(stderr, "no Metal device (%v): using the emulated device\n", err)
		}
		d, err := emu.NewDevice()
		return d, "emu", err
	}
	return nil, "", fmt.Errorf("%w: -backend %q, want auto, metal or emu", errUsage, backend)
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: -ids: %q is not a token id", errUsage, f)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

func generate(f generateFlags, stdout, stderr io.Writer) error {
	dir := f.model
	var golden []int32 // the embedded model's truth path, when its prompt is the golden one
	if dir == "" {
		tmp, err := embeddedModel(stderr)
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
		if f.prompt == "" && f.ids == "" {
			ps, err := tiny.Prompts()
			if err != nil {
				return err
			}
			f.ids = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ps[0].Prompt)), ","), "[]")
			golden, f.maxTokens, f.ignoreEOS = ps[0].Tokens, len(ps[0].Tokens), true
			if f.temperature != 0 {
				golden = nil
			}
		}
	}
	var tok *tokenizer.Tokenizer
	if _, err := os.Stat(dir + "/tokenizer.json"); err == nil {
		if tok, err = tokenizer.Load(dir); err != nil {
			return err
		}
	}
	var prompt []int32
	switch {
	case f.ids != "":
		var err error
		if prompt, err = parseIDs(f.ids); err != nil {
			return err
		}
	case tok == nil:
		return fmt.Errorf("%s has no tokenizer.json: give the prompt as -ids", dir)
	default:
		text := f.prompt
		if f.chat {
			tmpl, err := tokenizer.LoadChatTemplate(dir)
			if err != nil {
				return err
			}
			if text, err = tmpl.Render([]tokenizer.Message{{Role: "user", Content: f.prompt}}, tokenizer.ChatOptions{AddGenerationPrompt: true}); err != nil {
				return err
			}
		}
		prompt = tok.Encode(text)
	}
	if len(prompt) == 0 {
		return fmt.Errorf("%w: an empty prompt", errUsage)
	}

	dev, backend, err := openBackend(f.backend, stderr)
	if err != nil {
		return err
	}
	defer dev.Release()
	maxLen := f.maxLen
	if maxLen == 0 {
		maxLen = len(prompt) + f.maxTokens
	}
	t0 := time.Now()
	fmt.Fprintf(stderr, "loading %s on %s (%s)...\n", dir, dev.Name(), backend)
	m, err := model.Load(dev, dir, model.Options{MaxLen: maxLen, Chunk: f.chunk})
	if err != nil {
		return err
	}
	defer m.Release()
	s, err := m.NewSession()
	if err != nil {
		return err
	}
	defer s.Release()
	fmt.Fprintf(stderr, "loaded in %v: %s, %d layers, %v activations, %d bytes of weights copied\n", time.Since(t0).Round(time.Millisecond), m.Config.ModelType, m.Config.NumLayers, m.Act, m.CopiedBytes)
	fmt.Fprintf(stderr, "prefilling %d tokens...\n", len(prompt))

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	var dec *tokenizer.Decoder
	if tok != nil {
		dec = tok.NewDecoder(true)
	}
	opts := model.GenerateOptions{MaxTokens: f.maxTokens, IgnoreEOS: f.ignoreEOS,
		Sampling: model.Sampling{Temperature: float32(f.temperature), TopK: f.topK, TopP: float32(f.topP), MinP: float32(f.minP), Seed: f.seed, RepetitionPenalty: float32(f.repetitionPenalty)}}
	start := time.Now()
	var first time.Duration
	var ids []int32
	var buf []byte
	for id, err := range s.Generate(context.Background(), prompt, opts) {
		if err != nil {
			return err
		}
		if ids == nil {
			first = time.Since(start)
		}
		ids = append(ids, id)
		if dec != nil {
			if buf, err = dec.Append(buf[:0], id); err != nil {
				return err
			}
			out.Write(buf)
			out.Flush()
		}
	}
	total := time.Since(start)
	if dec != nil {
		out.Write(dec.Flush(buf[:0]))
		out.WriteString("\n")
	}
	if f.idsOut {
		fmt.Fprintf(out, "tokens:")
		for _, id := range ids {
			fmt.Fprintf(out, " %d", id)
		}
		fmt.Fprintln(out)
	}
	out.Flush()
	decodeRate := 0.0
	if len(ids) > 1 {
		decodeRate = float64(len(ids)-1) / (total - first).Seconds()
	}
	fmt.Fprintf(stderr, "backend %s: prompt %d tokens at %.1f tokens/s, time to first token %v, generated %d tokens at %.2f tokens/s; memory: weights %d bytes mapped (%d copied), caches and buffers %d bytes\n",
		backend, len(prompt), float64(len(prompt))/first.Seconds(), first.Round(time.Millisecond), len(ids), decodeRate, m.MappedBytes(), m.CopiedBytes, s.Bytes())
	if backend == "emu" && len(ids) > 0 {
		moved, floor, err := decodeTraffic(s, prompt, ids[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "emulated device: a decode step after the prompt moves %d bytes, floor %d (all weights it uses once, the KV cache, the states in and out): %.2fx\n", moved, floor, float64(moved)/float64(floor))
	}
	if golden != nil {
		if !slices.Equal(ids, golden) {
			return fmt.Errorf("the embedded model generated %v, its golden path is %v", ids, golden)
		}
		fmt.Fprintf(stderr, "check: the %d tokens are the golden path's\n", len(ids))
	}
	return nil
}

// decodeTraffic prefills prompt in a slot of s and measures, with the
// emulator's counters, the bytes the decode step of token moves, against
// the floor.
func decodeTraffic(s *model.Session, prompt []int32, token int32) (moved, floor int64, err error) {
	slot, err := s.Acquire()
	if err != nil {
		return 0, 0, err
	}
	defer s.Free(slot)
	if _, err := s.Prefill(slot, prompt, nil); err != nil {
		return 0, 0, err
	}
	floor = s.Model().DecodeFloor(s.Len(slot))
	q, err := s.Model().Device().NewCommandQueue()
	if err != nil {
		return 0, 0, err
	}
	defer q.Release()
	cb, err := q.CommandBuffer()
	if err != nil {
		return 0, 0, err
	}
	defer cb.Release()
	if err := s.EncodeDecode(cb, slot, token); err != nil {
		return 0, 0, err
	}
	cb.Commit()
	cb.WaitUntilCompleted()
	cs, err := emu.DispatchCounters(cb)
	for _, c := range cs {
		for i := range c.Loaded {
			moved += int64(c.Loaded[i] + c.Stored[i])
		}
	}
	return moved, floor, err
}
