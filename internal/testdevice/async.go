package testdevice

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/puremetal/puremetal/mtl"
)

// AsyncSuite checks, on whichever device g has, what a program that does
// not wait for each command buffer relies on: scheduled and completed
// handlers (their order, their thread, what they are told), Submit and a
// Wait bounded by a context, shared events ordering command buffers of
// two queues and waited for on the CPU through a listener, and InFlight's
// bound on the command buffers in flight. It asserts what Apple documents,
// so it runs on the emulated device and on a Mac's GPU alike.
func AsyncSuite(t *testing.T, g *GPU) {
	d, q := g.D, g.Q
	opts := mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_1}
	fill, add := g.Pipeline(BindingKernels, opts, "fill"), g.Pipeline(BindingKernels, opts, "add_into")
	const n = 1000

	t.Run("handlers order and thread", func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		committer := ThreadID()
		x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		var mu sync.Mutex
		var events []string
		var threads []uint64
		var completion mtl.Completion
		record := func(name string) func(mtl.Completion) {
			return func(c mtl.Completion) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, fmt.Sprintf("%s:%v", name, c.Status))
				threads = append(threads, ThreadID())
				if name == "completed1" {
					completion = c
				}
			}
		}
		const cbs = 4
		var last *mtl.CommandBuffer
		for k := range cbs {
			cb, enc := g.Encoder()
			EncodeFill(fill, x, n)(enc)
			if err := enc.EndEncoding(); err != nil {
				t.Fatal(err)
			}
			tag := func(s string) string { return fmt.Sprintf("%s%d", s, k) }
			for _, h := range []struct {
				add  func(func(mtl.Completion)) error
				name string
			}{
				{cb.AddCompletedHandler, tag("completed")},
				{cb.AddScheduledHandler, tag("scheduled")},
				{cb.AddCompletedHandler, tag("completed-again")},
			} {
				if err := h.add(record(h.name)); err != nil {
					t.Fatal(err)
				}
			}
			cb.Commit()
			if err := cb.AddCompletedHandler(record("late")); err == nil {
				t.Error("AddCompletedHandler after Commit was accepted")
			}
			last = cb
		}
		last.WaitUntilCompleted()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := len(events)
			mu.Unlock()
			if got == 3*cbs || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		// Per command buffer: the scheduled handler before the completed
		// ones, these in the order added; command buffers in commit order.
		var done []string
		for _, e := range events {
			if !strings.HasPrefix(e, "scheduled") {
				done = append(done, e)
			}
		}
		var want []string
		for k := range cbs {
			want = append(want, fmt.Sprintf("completed%d:Completed", k), fmt.Sprintf("completed-again%d:Completed", k))
		}
		if !slices.Equal(done, want) {
			t.Errorf("completed handlers ran as %v, want %v", done, want)
		}
		for k := range cbs {
			s := slices.Index(events, fmt.Sprintf("scheduled%d:Scheduled", k))
			if s < 0 {
				s = slices.Index(events, fmt.Sprintf("scheduled%d:Completed", k))
			}
			c := slices.Index(events, fmt.Sprintf("completed%d:Completed", k))
			if s < 0 || c < 0 || s > c {
				t.Errorf("command buffer %d: scheduled handler at %d, completed at %d in %v", k, s, c, events)
			}
		}
		for i, th := range threads {
			if th == committer {
				t.Errorf("handler %s ran on the committing thread %d", events[i], th)
			}
		}
		if completion.Err != nil || !(completion.GPUStartTime > 0 && completion.GPUEndTime >= completion.GPUStartTime) {
			t.Errorf("completed handler was told %+v", completion)
		}
	})

	t.Run("Submit and Wait", func(t *testing.T) {
		x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		p, err := q.Submit(func(cb *mtl.CommandBuffer) error {
			return EncodeFillIn(cb, fill, x, n)
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		c, ok := p.Completion()
		if !ok || c.Status != mtl.CommandBufferStatusCompleted || c.GPUSeconds() < 0 {
			t.Errorf("Completion %+v, %v", c, ok)
		}
		for i, v := range mtl.Slice[float32](x)[:n] {
			if v != 1+float32(i) {
				t.Fatalf("x[%d] = %v after Wait", i, v)
			}
		}
		// An encode error commits nothing, and Submit says so.
		if p, err := q.Submit(func(*mtl.CommandBuffer) error { return errors.New("no work") }); err == nil || p != nil {
			t.Errorf("Submit with a failing encode: %v, %v", p, err)
		}
	})

	t.Run("Wait times out, then the work completes", func(t *testing.T) {
		e := newEvent(t, d)
		p, err := q.Submit(func(cb *mtl.CommandBuffer) error { return cb.EncodeWaitForEvent(e, 1) })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait on a command buffer blocked by an event: %v, want a deadline error", err)
		}
		e.SetSignaledValue(1)
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("events order two queues", func(t *testing.T) {
		q2, err := d.NewCommandQueue()
		if err != nil {
			t.Fatal(err)
		}
		defer q2.Release()
		e := newEvent(t, d)
		l, err := mtl.NewSharedEventListener()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		a := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		b := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		// Queue 1: wait for 1, then b += a, then signal 2. Committed first.
		consumer, err := q.Submit(func(cb *mtl.CommandBuffer) error {
			if err := cb.EncodeWaitForEvent(e, 1); err != nil {
				return err
			}
			enc, err := cb.ComputeCommandEncoder()
			if err != nil {
				return err
			}
			enc.SetComputePipelineState(add)
			enc.SetBuffer(a, 0, 0)
			enc.SetBuffer(b, 0, 1)
			enc.DispatchThreads(mtl.Sz(n, 1, 1), mtl.Sz(32, 1, 1))
			if err := enc.EndEncoding(); err != nil {
				return err
			}
			return cb.EncodeSignalEvent(e, 2)
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if _, done := consumer.Completion(); done {
			t.Fatal("the command buffer waiting for the event completed before anything signalled it")
		}
		notified := make(chan uint64, 1)
		if err := e.NotifyListener(l, 2, func(v uint64) { notified <- v }); err != nil {
			t.Fatal(err)
		}
		// Queue 2: a = 1 + i, then signal 1.
		producer, err := q2.Submit(func(cb *mtl.CommandBuffer) error {
			if err := EncodeFillIn(cb, fill, a, n); err != nil {
				return err
			}
			return cb.EncodeSignalEvent(e, 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Wait(ctx, l, 2); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(producer.Wait(ctx), consumer.Wait(ctx)); err != nil {
			t.Fatal(err)
		}
		select {
		case v := <-notified:
			if v < 2 {
				t.Errorf("notified at value %d, asked for 2", v)
			}
		case <-ctx.Done():
			t.Fatal("the listener was never notified")
		}
		if v := e.SignaledValue(); v != 2 {
			t.Errorf("signaledValue %d, want 2", v)
		}
		for i, v := range mtl.Slice[float32](b)[:n] {
			if v != 1+float32(i) {
				t.Fatalf("b[%d] = %v: the consumer ran before the producer's signal", i, v)
			}
		}
		if err := (&mtl.CommandBuffer{}).EncodeSignalEvent(e, 3); err == nil {
			t.Error("EncodeSignalEvent on a released command buffer was accepted")
		}
	})

	t.Run("InFlight back-pressure", func(t *testing.T) {
		const max = 3
		f, err := mtl.NewInFlight(q, max)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mtl.NewInFlight(q, 0); err == nil {
			t.Error("NewInFlight with 0 was accepted")
		}
		gate := newEvent(t, d)
		x := g.Buffer(4*n, mtl.ResourceStorageModeShared)
		step := func(k int) func(cb *mtl.CommandBuffer) error {
			return func(cb *mtl.CommandBuffer) error {
				if err := cb.EncodeWaitForEvent(gate, uint64(k)); err != nil {
					return err
				}
				return EncodeFillIn(cb, fill, x, n)
			}
		}
		var pending []*mtl.Pending
		for k := range max {
			p, err := f.Submit(context.Background(), step(k+1))
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, p)
		}
		if f.Len() != max {
			t.Errorf("%d in flight after %d submits", f.Len(), max)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err = f.Submit(ctx, step(max+1))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a submit beyond %d in flight returned %v, want it held back until the deadline", max, err)
		}
		// Release one: the next submit goes through.
		gate.SetSignaledValue(1)
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := f.Submit(ctx, step(max+1))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
		if err := pending[0].Wait(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range pending[1:] {
			if _, done := p.Completion(); done {
				t.Error("a command buffer behind the gate completed")
			}
		}
		gate.SetSignaledValue(max + 1)
		if err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if f.Len() != 0 || f.Peak() != max {
			t.Errorf("after Wait: %d in flight, peak %d (want 0 and %d)", f.Len(), f.Peak(), max)
		}
		for k, p := range pending {
			if c, done := p.Completion(); !done || c.Status != mtl.CommandBufferStatusCompleted {
				t.Errorf("command buffer %d: %+v, done %v", k, c, done)
			}
		}
	})
}

// newEvent makes a shared event released when the test ends.
func newEvent(t *testing.T, d *mtl.Device) *mtl.SharedEvent {
	t.Helper()
	e, err := d.NewSharedEvent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Release)
	return e
}
