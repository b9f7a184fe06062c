package server

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/puremetal/puremetal/model"
)

// This file holds the generator that runs one sequence at a time on a
// model.Session, with a bounded queue of waiting requests, and the
// sentinels it ends generations with: a model that batches sequences
// continuously replaces it.

var (
	// errBusy ends a generation refused because the sequences running
	// and waiting are as many as allowed (HTTP 429).
	errBusy = errors.New("server: too many concurrent generations")
	// errClosed ends a generation refused or stopped because the
	// generator was closed (HTTP 503).
	errClosed = errors.New("server: the generator is closed")
)

// Serial runs generations one at a time on one model.Session: a request
// arriving while one runs waits its turn in a queue, and one arriving
// when the queue is full is refused at once (HTTP 429). It is safe for
// concurrent use.
type Serial struct {
	s       *model.Session
	turn    chan struct{} // holds a token while a generation runs
	tickets chan struct{} // one per generation running or waiting
	closed  context.Context
	close   context.CancelFunc
	once    sync.Once
}

// NewSerial returns a Serial over a new session of m, with room for
// queue requests waiting beside the one running.
func NewSerial(m *model.Model, queue int) (*Serial, error) {
	if queue < 0 {
		return nil, model.ErrInvalidArgument
	}
	s, err := m.NewSession()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Serial{s: s, turn: make(chan struct{}, 1), tickets: make(chan struct{}, 1+queue), closed: ctx, close: cancel}, nil
}

// Generate waits for the session, then generates as model.Session.Generate
// does; ctx's end stops the wait or the generation.
func (g *Serial) Generate(ctx context.Context, prompt []int32, o model.GenerateOptions) iter.Seq2[int32, error] {
	return func(yield func(int32, error) bool) {
		if g.closed.Err() != nil {
			yield(0, errClosed)
			return
		}
		select {
		case g.tickets <- struct{}{}:
		default:
			yield(0, errBusy)
			return
		}
		defer func() { <-g.tickets }()
		select {
		case g.turn <- struct{}{}:
		case <-ctx.Done():
			yield(0, ctx.Err())
			return
		case <-g.closed.Done():
			yield(0, errClosed)
			return
		}
		defer func() { <-g.turn }()
		if g.closed.Err() != nil {
			yield(0, errClosed)
			return
		}
		run, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(g.closed, cancel)
		defer stop()
		for id, err := range g.s.Generate(run, prompt, o) {
			if err != nil && g.closed.Err() != nil && ctx.Err() == nil {
				err = errClosed
			}
			if !yield(id, err) || err != nil {
				return
			}
		}
	}
}

// Close stops the generation running and refuses those waiting and any
// later one with an error the server answers with 503, waits for the
// session to be free and releases it. Later calls do nothing.
func (g *Serial) Close() error {
	g.once.Do(func() {
		g.close()
		g.turn <- struct{}{}
		g.s.Release()
	})
	return nil
}
