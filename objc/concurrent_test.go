package objc

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
)

// TestConcurrentSends sends from 8 goroutines at once, on whatever OS
// threads the Go scheduler gives them: argument lowering to Go and C
// methods, and, when Foundation is loaded, NSString round trips and
// autorelease pools on every goroutine.
func TestConcurrentSends(t *testing.T) {
	impls := abiImpls(t)
	foundation := GetClass("NSObject") != 0 && !testenv.FoundationDisabled()
	var cls Class
	if foundation {
		cls = countedClass(t)
	}
	const goroutines, rounds, perPool = 8, 200, 3
	mixed := abiCases[2]
	if mixed.cFn != "pm_mixed" {
		t.Fatal("abiCases[2] is not the mixed case")
	}
	sel := RegisterName(mixed.sel)
	objs := make([]ID, len(impls))
	for i, impl := range impls {
		obj, dispose := newInstance(t, impl.cls)
		defer dispose()
		objs[i] = obj
	}
	before := deallocs.Load()
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentWorker(impls, objs, sel, mixed, cls, uint64(g), rounds, perPool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if foundation {
		if d, want := deallocs.Load()-before, int64(goroutines*rounds*perPool); d != want {
			t.Errorf("%d autoreleased objects deallocated, want %d", d, want)
		}
	}
}

func concurrentWorker(impls []abiImpl, objs []ID, sel SEL, c abiCase, cls Class, seed uint64, rounds, perPool int) error {
	r := rand.New(rand.NewPCG(seed, 13))
	for i := range rounds {
		for k, impl := range impls {
			obj := objs[k]
			args := c.args(r)
			want := digest(append([]uint64{uint64(obj), uint64(sel)}, flatten(args)...))
			if got := SendArgs(obj, sel, args...); uint64(got) != want {
				return fmt.Errorf("goroutine %d round %d: %s %s returned %#x, want %#x", seed, i, impl.name, c.sel, got, want)
			}
		}
		if cls == 0 {
			continue
		}
		var err error
		WithAutoreleasePool(func() {
			for range perPool {
				cls.New().Autorelease()
			}
			s := randomText(r, 1+r.IntN(40))
			str, e := NewNSString(s)
			if e != nil {
				err = e
				return
			}
			if got := GoString(str.Autorelease()); got != s {
				err = fmt.Errorf("goroutine %d round %d: NSString round trip gave %q, want %q", seed, i, got, s)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}
