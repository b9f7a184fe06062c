package kernels

// These tests run the kernel sources on the CPU through the emulator's MSL
// runtime (package emu/msl), without the Metal binding in between, and
// compare them with the CPU references of package cpuref and with the
// golden vectors of HF transformers' Qwen3-Next implementation.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"sync"
	"testing"
	"unsafe"

	"github.com/puremetal/puremetal/cpuref"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/internal/golden"
	"github.com/puremetal/puremetal/internal/testenv"
	"golang.org/x/sys/unix"
)

// Error bounds, relative to the largest magnitude (cpuref.MaxRelErr).
const (
	boundRef32    = 1e-5 // against cpuref.Reference32
	boundOracle64 = 1e-4 // against cpuref.Oracle64
	boundGolden   = 1e-6 // against HF transformers' float32 and float64 results
)

// mem is kernel-visible memory outside the Go heap, as msl.Binding needs.
type mem struct{ b []byte }

func newMem(t testing.TB, floats int) *mem {
	t.Helper()
	n := 4 * floats
	b, err := unix.Mmap(-1, 0, max(n, 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return &mem{b: b[:n]}
}

func (m *mem) f32() []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&m.b[0])), len(m.b)/4)
}

func (m *mem) binding() msl.Binding {
	return msl.Binding{Ptr: uintptr(unsafe.Pointer(&m.b[0])), Len: len(m.b)}
}

func memOf(t testing.TB, x []float32) *mem {
	m := newMem(t, len(x))
	copy(m.f32(), x)
	return m
}

func poisoned(t testing.TB, floats int) *mem {
	m := newMem(t, floats)
	nan := float32(math.NaN())
	for i := range m.f32() {
		m.f32()[i] = nan
	}
	return m
}

// emuLibs compiles each source once per test binary.
var emuLibs struct {
	sync.Mutex
	libs map[string]*msl.Library
}

func emuFunction(t testing.TB, entry string) *msl.Function {
	t.Helper()
	file, ok := SourceFile(entry)
	if !ok {
		t.Fatalf("unknown entry point %s", entry)
	}
	emuLibs.Lock()
	defer emuLibs.Unlock()
	lib := emuLibs.libs[file]
	if lib == nil {
		if _, err := exec.LookPath("clang++"); err != nil {
			testenv.SkipOrFail(t, "the emulated device needs clang++ (Debian/Ubuntu: apt-get install clang)")
		}
		var err error
		lib, err = msl.Compile(Source(file), msl.CompileOptions{FileName: file})
		if err != nil {
			var ce *msl.CompileError
			if errors.As(err, &ce) {
				t.Fatalf("%s: %v\n%s", file, err, ce.Log)
			}
			t.Fatalf("%s: %v", file, err)
		}
		if emuLibs.libs == nil {
			emuLibs.libs = map[string]*msl.Library{}
		}
		emuLibs.libs[file] = lib
	}
	f, err := lib.Function(entry)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// paramBytes packs the nine parameter words of SPEC section 5.
func paramBytes(p cpuref.Params) []byte {
	var scale uint32
	if p.QScale != 0 {
		scale = math.Float32bits(p.QScale)
	}
	words := []uint32{uint32(p.DK), uint32(p.DV), uint32(p.NKHeads), uint32(p.NVHeads),
		uint32(p.NTokens), uint32(p.NSeqs), uint32(p.HeadMap), 0, scale}
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// kernelRun is one dispatch of one kernel on the emulator.
type kernelRun struct {
	entry        string
	p            cpuref.Params
	in           cpuref.Inputs
	inPlace      bool // state_in and state_out bound to one buffer
	captureSlots int  // tokens the capture buffer holds (capture kernels only)
	order        msl.Order
}

type kernelResult struct {
	out, state, capture []float32
	counters            msl.Counters
}

func isCapture(entry string) bool {
	for _, nsg := range []int{1, 2, 4} {
		if entry == DecodeCapture(nsg) {
			return true
		}
	}
	return false
}

func (r kernelRun) run(t testing.TB) kernelResult {
	t.Helper()
	p := r.p
	f := emuFunction(t, r.entry)
	q, k, v := memOf(t, r.in.Q), memOf(t, r.in.K), memOf(t, r.in.V)
	g, beta := memOf(t, r.in.G), memOf(t, r.in.Beta)
	stateIn := memOf(t, r.in.StateIn)
	out := poisoned(t, p.VLen())
	stateOut := poisoned(t, p.StateLen())
	if r.inPlace {
		stateOut = stateIn
	}
	params := newMem(t, 9)
	copy(params.b, paramBytes(p))

	d := &msl.Dispatch{Order: r.order, Seed: 11}
	for i, m := range []*mem{q, k, v, g, beta, stateIn, out, stateOut, params} {
		d.Buffers[i] = m.binding()
	}
	var capture *mem
	if isCapture(r.entry) {
		capture = poisoned(t, r.captureSlots*p.StateLen())
		d.Buffers[9] = capture.binding()
	}
	if r.entry == Prefill {
		d.ThreadgroupMemoryLength[0] = ((2*p.DK+2*p.DV)*4 + 15) &^ 15
		d.Grid = msl.ThreadgroupsGrid([3]int{p.NVHeads, p.NSeqs, 1}, [3]int{p.DV, 1, 1})
	} else {
		nsg := p.DK / 32
		d.Grid = msl.ThreadgroupsGrid([3]int{p.DV / nsg, p.NVHeads, p.NSeqs}, [3]int{32, nsg, 1})
	}
	c, err := f.Run(d)
	if err != nil {
		t.Fatalf("%s %v: %v", r.entry, p, err)
	}
	res := kernelResult{
		out:      append([]float32(nil), out.f32()...),
		state:    append([]float32(nil), stateOut.f32()...),
		counters: c,
	}
	if capture != nil {
		res.capture = append([]float32(nil), capture.f32()...)
	}
	return res
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// decodeFamily returns the four decode-family entry points for nsg, decode
// first.
func decodeFamily(nsg int) []string {
	return []string{Decode(nsg), DecodeSeq(nsg), DecodeLegacy(nsg), DecodeCapture(nsg)}
}

type suiteCase struct {
	p    cpuref.Params
	seed uint64
}

func suiteCases() []suiteCase {
	var cases []suiteCase
	seed := uint64(100)
	for _, dk := range []int{32, 64, 128} {
		for _, hm := range []cpuref.HeadMap{cpuref.Block, cpuref.Tiled} {
			for _, nt := range []int{1, 2, 5} {
				for _, ns := range []int{1, 3} {
					for _, scale := range []float32{0, float32(1 / math.Sqrt(float64(dk)))} {
						seed++
						cases = append(cases, suiteCase{
							p: cpuref.Params{
								Shape:   cpuref.Shape{DK: dk, DV: 12, NKHeads: 2, NVHeads: 6, NTokens: nt, NSeqs: ns},
								HeadMap: hm, QScale: scale,
							},
							seed: seed,
						})
					}
				}
			}
		}
	}
	return cases
}

// TestKernelsAgainstReferences runs every kernel, NSG 1, 2 and 4, both head
// mappings, 1, 2 and 5 tokens, 1 and 3 sequences, with and without q scale,
// in two scheduling orders, against both CPU references; and checks that the
// decode family is bit-identical, that capture's last slot is state_out,
// and the memory traffic the emulator measured.
func TestKernelsAgainstReferences(t *testing.T) {
	for _, c := range suiteCases() {
		p := c.p
		name := fmt.Sprintf("%v/%v/scale=%g", p.Shape, p.HeadMap, p.QScale)
		t.Run(name, func(t *testing.T) {
			in, err := cpuref.RandomInputs(p, c.seed)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := cpuref.Reference32(p, in, true)
			if err != nil {
				t.Fatal(err)
			}
			ora, err := cpuref.Oracle64(p, in, true)
			if err != nil {
				t.Fatal(err)
			}
			nsg := p.DK / 32
			slots := p.NTokens
			if p.NSeqs == 1 {
				slots += 2 // a capture buffer longer than the draft
			}
			var first []byte // decode's output and state, in bytes
			for _, order := range []msl.Order{msl.Forward, msl.Reverse} {
				for _, entry := range append(decodeFamily(nsg), Prefill) {
					r := kernelRun{entry: entry, p: p, in: in, captureSlots: slots, order: order}.run(t)
					what := fmt.Sprintf("%s (%v)", entry, order)
					checkClose(t, what+" output", r.out, ref.Output, ora.Output)
					checkClose(t, what+" state", r.state, ref.StateOut, ora.StateOut)
					checkTraffic(t, what, p, r.counters, entry, false)
					if entry == Prefill {
						continue
					}
					got := append(f32Bytes(r.out), f32Bytes(r.state)...)
					if first == nil {
						first = got
					} else if !bytes.Equal(got, first) {
						t.Errorf("%s: output and state are not bit-identical to %s (forward)", what, Decode(nsg))
					}
					if r.capture != nil {
						checkCapture(t, what, p, r.capture, r.state, ref.Capture, ora.Capture)
					}
				}
			}
			// state_in and state_out as one buffer.
			for _, entry := range append(decodeFamily(nsg), Prefill) {
				r := kernelRun{entry: entry, p: p, in: in, inPlace: true, captureSlots: p.NTokens, order: msl.Reverse}.run(t)
				what := entry + " in place"
				checkClose(t, what+" output", r.out, ref.Output, ora.Output)
				checkClose(t, what+" state", r.state, ref.StateOut, ora.StateOut)
				checkTraffic(t, what, p, r.counters, entry, true)
				if entry != Prefill && !bytes.Equal(append(f32Bytes(r.out), f32Bytes(r.state)...), first) {
					t.Errorf("%s: not bit-identical to the separate-buffer run", what)
				}
			}
		})
	}
}

func checkClose(t *testing.T, what string, got, ref []float32, oracle []float64) {
	t.Helper()
	if e := cpuref.MaxRelErr(got, ref); !(e <= boundRef32) {
		t.Errorf("%s: relative error %.3g against Reference32, bound %g", what, e, boundRef32)
	}
	if e := cpuref.MaxRelErr64(got, oracle); !(e <= boundOracle64) {
		t.Errorf("%s: relative error %.3g against Oracle64, bound %g", what, e, boundOracle64)
	}
}

// checkCapture compares the capture buffer with the references, checks that
// the last token's slot of every sequence is byte-identical to state_out,
// and that slots past the draft were left alone.
func checkCapture(t *testing.T, what string, p cpuref.Params, capture, state, ref []float32, oracle []float64) {
	t.Helper()
	n := p.CaptureLen()
	checkClose(t, what+" capture", capture[:n], ref, oracle)
	per := p.StateLen() / p.NSeqs // one sequence's state
	for s := 0; s < p.NSeqs; s++ {
		last := capture[((s*p.NTokens)+p.NTokens-1)*per:][:per]
		if !bytes.Equal(f32Bytes(last), f32Bytes(state[s*per:][:per])) {
			t.Errorf("%s: capture slot of token %d, sequence %d is not byte-identical to state_out", what, p.NTokens-1, s)
		}
	}
	for i, x := range capture[n:] {
		if !math.IsNaN(float64(x)) {
			t.Errorf("%s: capture element %d beyond the draft was written", what, n+i)
			break
		}
	}
}

// checkTraffic checks the emulator's byte counters: each state cell read
// once and written once per dispatch, whatever n_tokens is; capture writes
// one state per token; every output written once.
func checkTraffic(t *testing.T, what string, p cpuref.Params, c msl.Counters, entry string, inPlace bool) {
	t.Helper()
	state := uint64(4 * p.StateLen())
	in, out := 5, 7
	if inPlace {
		out = 5 // an access is charged to the lowest binding that holds it
	}
	wantCapture := uint64(0)
	if isCapture(entry) {
		wantCapture = uint64(p.NTokens) * state
	}
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"state loaded", c.Loaded[in], state},
		{"state stored", c.Stored[out], state},
		{"output stored", c.Stored[6], uint64(4 * p.VLen())},
		{"capture stored", c.Stored[9], wantCapture},
	}
	if !inPlace {
		checks = append(checks,
			struct {
				name      string
				got, want uint64
			}{"state_out loaded", c.Loaded[7], 0},
			struct {
				name      string
				got, want uint64
			}{"state_in stored", c.Stored[5], 0})
	}
	for _, k := range checks {
		if k.got != k.want {
			t.Errorf("%s: %s %d bytes, want %d", what, k.name, k.got, k.want)
		}
	}
}

// TestGoldenVectors runs every kernel on HF transformers' Qwen3-Next cases.
func TestGoldenVectors(t *testing.T) {
	for _, gc := range golden.LoadAll(t) {
		t.Run(gc.Name, func(t *testing.T) {
			p := gc.Params
			entries := []string{Prefill}
			if p.DK == 32 || p.DK == 64 || p.DK == 128 {
				entries = append(entries, decodeFamily(p.DK/32)...)
			}
			for _, entry := range entries {
				r := kernelRun{entry: entry, p: p, in: gc.Inputs, captureSlots: p.NTokens, order: msl.Forward}.run(t)
				for _, cmp := range []struct {
					what      string
					got, want []float32
				}{
					{"output vs HF", r.out, gc.Output},
					{"state vs HF", r.state, gc.StateOut},
					{"output vs float64 loop", r.out, gc.OutputF64},
					{"state vs float64 loop", r.state, gc.StateOutF64},
				} {
					if e := cpuref.MaxRelErr(cmp.got, cmp.want); !(e <= boundGolden) {
						t.Errorf("%s: %s: relative error %.3g, bound %g", entry, cmp.what, e, boundGolden)
					}
				}
				if r.capture != nil && gc.Capture != nil {
					if e := cpuref.MaxRelErr(r.capture, gc.Capture); !(e <= boundGolden) {
						t.Errorf("%s: capture vs HF: relative error %.3g, bound %g", entry, e, boundGolden)
					}
				}
			}
		})
	}
}
