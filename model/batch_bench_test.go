package model_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
)

// benchModel returns the device and checkpoint folder of the batching
// benchmarks: $PUREMETAL_MODEL on a Mac's Metal device when set, else
// the embedded tiny model on the emulated device.
func benchModel(b *testing.B) (*mtl.Device, string) {
	if dir := os.Getenv("PUREMETAL_MODEL"); dir != "" {
		return testdevice.Metal(b), dir
	}
	dir := b.TempDir()
	if err := tiny.WriteDir(dir); err != nil {
		b.Fatal(err)
	}
	return testdevice.Emulated(b, emu.Options{}), dir
}

// benchPrompt returns n token ids, varied by seed, inside vocab.
func benchPrompt(n, seed, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(((i*7919+seed*104729+13)%vocab + vocab) % vocab)
	}
	return p
}

// BenchmarkBatch serves streams requests at once through a Batcher
// (streams = MaxBatch), each a 32-token prompt and 32 generated tokens,
// then the same requests one by one, and reports the aggregate tokens/s
// of both (and their ratio, the batching gain), the mean latency of a
// request served among the others, and the host's time per batched step
// (planning, encoding and committing it).
//
//	go test ./model -run '^$' -bench 'Batch$' -benchtime 1x
//	PUREMETAL_MODEL=~/models/Qwen3-Next-80B-A3B-Instruct-4bit go test ./model -run '^$' -bench 'Batch$' -benchtime 4x
func BenchmarkBatch(b *testing.B) {
	const promptLen, gen = 32, 32
	dev, dir := benchModel(b)
	m, err := model.Load(dev, dir, model.Options{MaxLen: promptLen + gen, Chunk: promptLen})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	for _, streams := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			bt, err := m.NewBatcher(model.BatchOptions{MaxBatch: streams})
			if err != nil {
				b.Fatal(err)
			}
			defer bt.Close()
			o := model.GenerateOptions{MaxTokens: gen, IgnoreEOS: true}
			serve := func(i int) {
				for _, err := range bt.Generate(context.Background(), benchPrompt(promptLen, i, m.Config.VocabSize), o) {
					if err != nil {
						b.Error(err)
						return
					}
				}
			}
			serve(-1) // the pipelines made
			warm := bt.Stats()
			var together, alone, latency time.Duration
			for range b.N {
				start := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for i := range streams {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t0 := time.Now()
						serve(i)
						mu.Lock()
						latency += time.Since(t0)
						mu.Unlock()
					}()
				}
				wg.Wait()
				together += time.Since(start)
				start = time.Now()
				for i := range streams {
					serve(i)
				}
				alone += time.Since(start)
			}
			st := bt.Stats()
			tokens := float64(b.N * streams * gen)
			b.ReportMetric(tokens/together.Seconds(), "tokens/s")
			b.ReportMetric(tokens/alone.Seconds(), "tokens/s-one-by-one")
			b.ReportMetric(alone.Seconds()/together.Seconds(), "gain")
			b.ReportMetric(latency.Seconds()*1e3/float64(b.N*streams), "ms/request")
			b.ReportMetric(float64((st.HostTime-warm.HostTime).Microseconds())/float64(st.Steps-warm.Steps), "host-µs/step")
		})
	}
}

// BenchmarkBatchPrefix measures the time to first token of a prompt of
// 320 tokens (Chunk 64) run cold, then of the same prompt with 8 more
// tokens, which starts from the cached caches of its first 320 (a
// multi-turn chat's next turn), and reports both.
//
//	go test ./model -run '^$' -bench 'BatchPrefix' -benchtime 2x
func BenchmarkBatchPrefix(b *testing.B) {
	const promptLen, chunk = 320, 64
	dev, dir := benchModel(b)
	m, err := model.Load(dev, dir, model.Options{MaxLen: 512, Chunk: chunk})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	bt, err := m.NewBatcher(model.BatchOptions{MaxBatch: 1, PrefixSlots: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	ttft := func(p []int32) time.Duration {
		start := time.Now()
		for _, err := range bt.Generate(context.Background(), p, model.GenerateOptions{MaxTokens: 1, IgnoreEOS: true}) {
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	ttft(benchPrompt(8, -1, m.Config.VocabSize)) // the pipelines made
	var cold, warm time.Duration
	for i := range b.N {
		p := benchPrompt(promptLen+8, i, m.Config.VocabSize)
		cold += ttft(p[:promptLen])
		warm += ttft(p)
	}
	if st := bt.Stats(); st.PrefixHits != uint64(b.N) || st.PrefixTokens != uint64(b.N*promptLen) {
		b.Fatalf("stats %+v: want a hit of %d tokens per iteration", st, promptLen)
	}
	b.ReportMetric(cold.Seconds()*1e3/float64(b.N), "ms-ttft-cold")
	b.ReportMetric(warm.Seconds()*1e3/float64(b.N), "ms-ttft-reused")
}
