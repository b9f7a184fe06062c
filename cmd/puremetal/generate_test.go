package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testdevice"
)

// TestGenerateGolden runs puremetal generate on a golden case folder
// (float32, where every greedy token is decided far beyond the kernels'
// error) with the prompt as -ids, and checks the -ids-out line is the
// truth's path; then with no -model, the embedded tiny model checks
// itself against its golden path.
func TestGenerateGolden(t *testing.T) {
	if err := testdevice.EmulatedOpens(); err != nil {
		t.Skip(err)
	}
	c, err := golden.LoadModel(filepath.Join(golden.SetDir(t, golden.ModelsSubdir), "qwen3next_moe_f32"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Prompts[1]
	ids := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.Prompt)), ","), "[]")
	status, stdout, stderr := puremetal("", "generate", "-model", c.Dir, "-ids", ids, "-max-tokens", fmt.Sprint(len(p.Tokens)), "-ignore-eos", "-ids-out", "-backend", "emu", "-chunk", "4")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	want := "tokens: " + strings.Trim(fmt.Sprint(p.Tokens), "[]")
	if last := lastLine(stdout); last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
	for _, summary := range []string{"time to first token", "tokens/s", "backend emu"} {
		if !strings.Contains(stderr, summary) {
			t.Errorf("the summary says no %q: %s", summary, stderr)
		}
	}
	status, _, stderr = puremetal("", "generate", "-backend", "emu")
	if status != 0 || !strings.Contains(stderr, "golden path's") {
		t.Errorf("the embedded model: status %d: %s", status, stderr)
	}
	if status, _, _ := puremetal("", "generate", "-max-tokens", "0"); status != 2 {
		t.Errorf("-max-tokens 0: status %d, want 2", status)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
