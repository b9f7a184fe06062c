package model_test

import (
	"context"
	"os"
	"testing"

	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/model"
)

// BenchmarkMetalDecode measures greedy decode on a Mac: the checkpoint in
// $PUREMETAL_MODEL (an HF or mlx-community folder), a 128-token prompt,
// then b.N tokens through Generate (one command buffer per token, the
// token fed on the device). It reports tokens/s. It skips off a Mac
// (no Metal) and without $PUREMETAL_MODEL.
//
//	PUREMETAL_MODEL=~/models/Qwen3-Next-80B-A3B-Instruct-4bit go test ./model -run '^$' -bench MetalDecode -benchtime 128x
//
// mlx-lm's figure for the same folder: mlx_lm.benchmark (or mlx_lm.generate
// --max-tokens 128, which prints its generation tokens-per-sec); llama.cpp's:
// llama-bench -m model.gguf -p 128 -n 128.
func BenchmarkMetalDecode(b *testing.B) {
	dev := testdevice.Metal(b)
	dir := os.Getenv("PUREMETAL_MODEL")
	if dir == "" {
		b.Skip("set PUREMETAL_MODEL to a checkpoint folder")
	}
	m, err := model.Load(dev, dir, model.Options{MaxLen: 128 + b.N + 1, Chunk: 128})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	s, err := m.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Release()
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32((i*7919 + 13) % m.Config.VocabSize)
	}
	b.ResetTimer()
	n := 0
	for _, err := range s.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: b.N + 1, IgnoreEOS: true}) {
		if err != nil {
			b.Fatal(err)
		}
		if n++; n == 1 {
			b.ResetTimer() // the prefill and the first token
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
