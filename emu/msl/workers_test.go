package msl

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

func mappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatalf("reading /proc/self/maps: %v", err)
	}
	return bytes.Count(b, []byte("\n"))
}

// Many workers and many dispatches at once (as on a machine with 64 CPUs,
// or with many queues) share a bounded set of worker arenas, each one
// memory mapping plus a guard page: the process's mappings stay far from
// vm.max_map_count, every dispatch completes, and idle arenas are freed.
func TestManyWorkersBoundedMappings(t *testing.T) {
	lib := compileT(t, concurrentSrc, CompileOptions{})
	f := functionT(t, lib, "tg_sum")
	const tg, groups, dispatches = 64, 256, 12
	in := newF32(t, tg*groups)
	fillRandom(in.f32(), 5)
	want := make([]float32, groups)
	for g := range want {
		want[g] = treeSum(in.f32()[g*tg : (g+1)*tg])
	}
	before := mappings(t)
	var mu sync.Mutex
	peakArenas, peakMaps := uint64(0), 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			a, _ := arenaStats()
			m := mappings(t)
			mu.Lock()
			peakArenas, peakMaps = max(peakArenas, a), max(peakMaps, m)
			mu.Unlock()
		}
	}()
	errs := make(chan error, dispatches)
	for i := 0; i < dispatches; i++ {
		sums := newF32(t, groups)
		go func(i int) {
			for rep := 0; rep < 3; rep++ {
				poison(sums.f32())
				d := &Dispatch{Grid: ThreadgroupsGrid([3]int{groups, 1, 1}, [3]int{tg, 1, 1}), Workers: 64, Order: Order(i % 3), Seed: uint64(rep)}
				d.Buffers[0], d.Buffers[1] = in.binding(), sums.binding()
				d.ThreadgroupMemoryLength[0] = tg * 4
				if _, err := f.Run(d); err != nil {
					errs <- err
					return
				}
				for g := range want {
					if math.Float32bits(sums.f32()[g]) != math.Float32bits(want[g]) {
						errs <- fmt.Errorf("dispatch %d: group %d sum %v, want %v", i, g, sums.f32()[g], want[g])
						return
					}
				}
			}
			errs <- nil
		}(i)
	}
	for i := 0; i < dispatches; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-sampled
	arenas, idle := arenaStats()
	after := mappings(t)
	t.Logf("mappings before %d, peak %d, after %d; arenas peak %d, after %d (%d idle)", before, peakMaps, after, peakArenas, arenas, idle)
	if peakArenas > 64 || arenas != idle {
		t.Fatalf("%d arenas at the peak (limit 64), %d left of which %d idle", peakArenas, arenas, idle)
	}
	if keep := uint64(min(max(runtime.NumCPU(), 2), 64)); idle > keep {
		t.Fatalf("%d idle arenas kept, want at most %d", idle, keep)
	}
	// an arena is 3 mappings, a worker thread's stack 2
	if grown := peakMaps - before; grown > 64*5+200 {
		t.Fatalf("mappings grew by %d during the dispatches (from %d to %d)", grown, before, peakMaps)
	}
}
