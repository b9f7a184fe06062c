package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/puremetal/puremetal/model"
	"github.com/puremetal/puremetal/model/tiny"
	"github.com/puremetal/puremetal/server"
	"github.com/puremetal/puremetal/tokenizer"
)

// serveFlags are serve's flags.
type serveFlags struct {
	model, addr, name, backend string
	maxLen, chunk, queue       int
	batch, prefixSlots         int
	shutdown                   time.Duration
}

func runServe(args []string, _ io.Reader, _, stderr io.Writer) error {
	fs := newFlagSet("serve", "serve [-model DIR] [-addr HOST:PORT] [flags]", stderr)
	var f serveFlags
	fs.StringVar(&f.model, "model", "", "checkpoint folder (config.json, *.safetensors, tokenizer.json); none: the embedded tiny model of random weights")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on (port 0: any free port, printed on stderr)")
	fs.StringVar(&f.name, "name", "", "the model's id in the API (default: the folder's name)")
	fs.StringVar(&f.backend, "backend", "auto", "auto (metal where there is Metal, else emu), metal or emu")
	fs.IntVar(&f.maxLen, "max-len", 4096, "positions a sequence holds, prompt and completion")
	fs.IntVar(&f.chunk, "chunk", 256, "prompt tokens per prefill pass")
	fs.IntVar(&f.batch, "batch", 8, "sequences decoded together (continuous batching)")
	fs.IntVar(&f.queue, "queue", 16, "requests waiting for a place in the batch; more are refused with 429")
	fs.IntVar(&f.prefixSlots, "prefix-cache", 4, "prompt prefixes kept for reuse (a system prompt, a chat's earlier turns), each the caches of one sequence; 0: off")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", 10*time.Second, "how long SIGINT or SIGTERM waits for requests in flight before canceling them")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.maxLen < 2 || f.queue < 0 || f.chunk < 1 || f.batch < 1 || f.prefixSlots < 0 {
		return fmt.Errorf("%w: -max-len %d (want at least 2), -batch %d (want at least 1), -queue %d, -prefix-cache %d (want 0 or more), -chunk %d (want at least 1)", errUsage, f.maxLen, f.batch, f.queue, f.prefixSlots, f.chunk)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, f, stderr, nil)
}

// newGenerator returns the generator the server runs on m, closed when
// the server has shut down.
func newGenerator(m *model.Model, f serveFlags) (interface {
	server.Generator
	Close() error
}, error) {
	return m.NewBatcher(model.BatchOptions{MaxBatch: f.batch, Queue: f.queue, PrefixSlots: f.prefixSlots})
}

// serve loads the model, serves it until ctx ends, then shuts down: the
// requests in flight get f.shutdown to finish, those left are canceled,
// and the model and device are released. ready, when not nil, is called
// with the address listened on.
func serve(ctx context.Context, f serveFlags, stderr io.Writer, ready func(addr string)) error {
	dir, name := f.model, f.name
	if dir == "" {
		var err error
		if dir, err = embeddedModel(stderr); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		name = cmp.Or(name, tiny.Name)
	}
	name = cmp.Or(name, filepath.Base(filepath.Clean(dir)))
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return err
	}
	chat, err := tokenizer.LoadChatTemplate(dir)
	if err != nil {
		fmt.Fprintf(stderr, "no chat template (%v): /v1/chat/completions will answer 400\n", err)
		chat = nil
	}

	dev, backend, err := openBackend(f.backend, stderr)
	if err != nil {
		return err
	}
	defer dev.Release()
	t0 := time.Now()
	fmt.Fprintf(stderr, "loading %s on %s (%s)...\n", dir, dev.Name(), backend)
	m, err := model.Load(dev, dir, model.Options{MaxLen: f.maxLen, Chunk: f.chunk})
	if err != nil {
		return err
	}
	defer m.Release()
	gen, err := newGenerator(m, f)
	if err != nil {
		return err
	}
	defer gen.Close()
	fmt.Fprintf(stderr, "loaded in %v: %s, %d layers, %v activations\n", time.Since(t0).Round(time.Millisecond), m.Config.ModelType, m.Config.NumLayers, m.Act)

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	logger := log.New(stderr, "puremetal serve: ", log.LstdFlags)
	srv := &http.Server{
		Handler:           server.New(gen, tok, chat, server.Options{Model: name, MaxLen: f.maxLen, ErrorLog: logger}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "serving %q on http://%s (POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health)\n", name, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "shutting down: waiting up to %v for requests in flight\n", f.shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), f.shutdown)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, "requests still in flight: canceling them")
		err = nil
	}
	// Closing the generator cancels what still runs; Close closes the
	// connections of the handlers that remain.
	gen.Close()
	srv.Close()
	if e := <-served; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	fmt.Fprintln(stderr, "shut down")
	return err
}
