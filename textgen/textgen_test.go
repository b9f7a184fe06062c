package textgen_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/internal/tinymodel"
	"github.com/puremetal/puremetal/textgen"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, testdevice.DeviceOpens)) }

// A chat prompt through the Pipeline: its text, streamed or whole, is the
// tokenizer's decoding of the session's own greedy ids; the usage counts
// them; a stop sequence taken from the middle of that text cuts it there
// and ends the generation early; a request past the context is refused.
func TestPipeline(t *testing.T) {
	c := tinymodel.Load(t, 64)
	s := c.Session(t)
	p := textgen.New(s, c.Tok, c.Chat, c.MaxLen)
	prompt, err := p.EncodeChat(json.RawMessage(`[{"role":"user","content":"Hello!"}]`), chatOpts)
	if err != nil {
		t.Fatal(err)
	}
	const maxTokens = 12
	want, n := c.Greedy(t, s, prompt, maxTokens)
	ctx := context.Background()

	var pieces []string
	res, err := p.Stream(ctx, prompt, textgen.Options{MaxTokens: maxTokens}, func(piece string) error {
		pieces = append(pieces, piece)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pieces, ""); got != want {
		t.Errorf("streamed %q, the session's ids decode to %q", got, want)
	}
	wantReason := textgen.FinishLength
	if n < maxTokens {
		wantReason = textgen.FinishStop // an eos token
	}
	if res.FinishReason != wantReason || res.Usage != (textgen.Usage{PromptTokens: len(prompt), CompletionTokens: n}) {
		t.Errorf("result %+v, want %s after %d prompt and %d completion tokens", res, wantReason, len(prompt), n)
	}
	if res.Usage.TotalTokens() != len(prompt)+n {
		t.Errorf("total tokens %d, want %d", res.Usage.TotalTokens(), len(prompt)+n)
	}

	// A stop sequence: a piece of the text from its middle.
	r := []rune(want)
	if len(r) < 4 {
		t.Fatalf("the reference text %q is too short to take a stop sequence from", want)
	}
	stop := string(r[len(r)/2 : len(r)/2+2])
	cut := want[:strings.Index(want, stop)]
	text, res, err := p.Complete(ctx, prompt, textgen.Options{MaxTokens: maxTokens, Stop: []string{"never in it \x00", stop}})
	if err != nil {
		t.Fatal(err)
	}
	if text != cut || res.FinishReason != textgen.FinishStop || res.Usage.CompletionTokens >= n {
		t.Errorf("stop %q: %q, %+v; want %q, stop, fewer than %d tokens", stop, text, res, cut, n)
	}

	// Past the context: refused before generating.
	if _, _, err := p.Complete(ctx, prompt, textgen.Options{MaxTokens: c.MaxLen - len(prompt) + 1}); !errors.Is(err, textgen.ErrContextLength) {
		t.Errorf("a completion past the context: %v, want ErrContextLength", err)
	}
	// MaxTokens 0: as many as fit, here 3 after a long prompt.
	long := prompt
	for len(long) < c.MaxLen-3 {
		long = append(long, prompt...)
	}
	long = long[:c.MaxLen-3]
	if _, res, err := p.Complete(ctx, long, textgen.Options{}); err != nil || res.Usage.CompletionTokens > 3 || (res.Usage.CompletionTokens == 3) != (res.FinishReason == textgen.FinishLength) {
		t.Errorf("MaxTokens 0, room for 3 tokens: %+v, %v", res, err)
	}
	for _, o := range []textgen.Options{{MaxTokens: -1}, {Stop: []string{""}}} {
		if _, _, err := p.Complete(ctx, prompt, o); !errors.Is(err, textgen.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	if _, _, err := p.Complete(ctx, nil, textgen.Options{}); !errors.Is(err, textgen.ErrInvalid) {
		t.Errorf("an empty prompt: %v, want ErrInvalid", err)
	}
}
