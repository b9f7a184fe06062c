package model_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/mtl"
)

// Serving concurrent requests: a Batcher decodes them together, each
// request's tokens those it would get alone; a request beyond the batch
// and its queue is refused with ErrBusy (an HTTP server's 429).
func ExampleBatcher() {
	dir, err := os.MkdirTemp("", "tiny")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := tiny.WriteDir(dir); err != nil {
		log.Fatal(err)
	}
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice()
	}
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	m, err := model.Load(dev, dir, model.Options{MaxLen: 64, Chunk: 8})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Release()
	b, err := m.NewBatcher(model.BatchOptions{MaxBatch: 4, Queue: 4, PrefixSlots: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	prompts := [][]int32{{970, 11, 1879}, {970, 11, 1879, 0, 1}, {42}}
	counts := make([]int, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, err := range b.Generate(context.Background(), p, model.GenerateOptions{MaxTokens: 5, IgnoreEOS: true}) {
				if err != nil {
					log.Print(err)
					return
				}
				counts[i]++
			}
		}()
	}
	wg.Wait()
	fmt.Println("tokens per request:", counts, "steps run:", b.Stats().Steps > 0)
	// Output: tokens per request: [5 5 5] steps run: true
}
