package server_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/puremetal/puremetal/emu"
)

// soakRequests is how many requests TestSoak serves: a few hundred keep
// the package's tests short; go test ./server -run TestSoak -soak 5000
// serves thousands.
var soakRequests = flag.Int("soak", 400, "requests TestSoak serves")

// TestSoak serves -soak short completions from 8 concurrent
// clients and checks that nothing grows between the end of a warm-up
// (the first 10%: pools, caches and the kernels' pipelines made) and the
// end: the live emulated Metal objects and the goroutines come back to
// their counts exactly, the Go heap after a collection grows by less
// than 256 bytes a request, and the process's resident memory (which
// also sees the emulated device's C allocations) by less than 8 KiB a
// request. A request that leaked one command buffer, one buffer or one
// goroutine would trip the first two, a leaked slice of its tokens the
// third.
func TestSoak(t *testing.T) {
	const clients = 8
	soakRequests := *soakRequests
	c, gen := testEngine(t, 64, clients, clients)
	ts := serve(t, c, gen)
	url := ts.URL + "/v1/completions"
	run := func(n int) {
		var wg sync.WaitGroup
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += clients {
					body := fmt.Sprintf(`{"model":%q,"prompt":[%d,%d,%d],"max_tokens":2,"temperature":0}`, modelID, 1+i%50, 7, 11)
					if status, _, b := do(t, "POST", url, body); status != 200 {
						t.Errorf("request %d: %d %s", i, status, b)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	type reading struct {
		objects, goroutines int
		heap, rss           uint64
	}
	read := func() reading {
		// Command buffers are released by their queue's handler thread
		// once their handlers return, and idle HTTP connections close
		// on their own: wait briefly for the counts to settle.
		var r reading
		for deadline := time.Now().Add(5 * time.Second); ; {
			r.objects, r.goroutines = emu.LiveObjects(), runtime.NumGoroutine()
			time.Sleep(20 * time.Millisecond)
			if (r.objects == emu.LiveObjects() && r.goroutines == runtime.NumGoroutine()) || time.Now().After(deadline) {
				break
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r.heap, r.rss = ms.HeapAlloc, residentBytes(t)
		return r
	}
	warm := soakRequests / 10
	start := time.Now()
	run(warm)
	before := read()
	run(soakRequests - warm)
	after := read()
	n := uint64(soakRequests - warm)
	t.Logf("%d requests in %v; from request %d to %d: live objects %d -> %d, goroutines %d -> %d, heap %d -> %d bytes, resident %d -> %d bytes",
		soakRequests, time.Since(start).Round(time.Millisecond), warm, soakRequests, before.objects, after.objects, before.goroutines, after.goroutines, before.heap, after.heap, before.rss, after.rss)
	if after.objects != before.objects {
		t.Errorf("live emulated objects: %d after %d requests, %d after %d more", before.objects, warm, after.objects, n)
	}
	if after.goroutines > before.goroutines {
		t.Errorf("goroutines: %d after %d requests, %d after %d more", before.goroutines, warm, after.goroutines, n)
	}
	if after.heap > before.heap+256*n {
		t.Errorf("the Go heap grew by %d bytes over %d requests, more than 256 a request", after.heap-before.heap, n)
	}
	if after.rss > before.rss+8192*n {
		t.Errorf("resident memory grew by %d bytes over %d requests, more than 8 KiB a request", after.rss-before.rss, n)
	}
}

// residentBytes returns the process's resident set size (VmRSS).
func residentBytes(t *testing.T) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("resident memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
