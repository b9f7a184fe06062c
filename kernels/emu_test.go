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

func isCapture(entry string) bool {
	for _, nsg := range []int{1, 2, 4} {
		if entry == DecodeCapture(nsg) {
			return true
		}
	}
	return false
}

func (r kernelRun) run(t testing.TB) runResult {
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
		d.Buffers[bindCapture] = capture.binding()
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
	res := runResult{
		Output:   append([]float32(nil), out.f32()...),
		State:    append([]float32(nil), stateOut.f32()...),
		Counters: c,
	}
	if capture != nil {
		res.Capture = append([]float32(nil), capture.f32()...)
	}
	return res
}

// decodeFamily returns the four decode-family entry points for nsg, decode
// first.
func decodeFamily(nsg int) []string {
	return []string{Decode(nsg), DecodeSeq(nsg), DecodeLegacy(nsg), DecodeCapture(nsg)}
}

// TestKernelsAgainstReferences runs every kernel of the parity matrix
// (parityCases) in two scheduling orders against both CPU references,
// checks that the decode family is bit-identical, capture's slots, the
// in-place update, and the memory traffic the emulator measured.
func TestKernelsAgainstReferences(t *testing.T) {
	for _, c := range parityCases() {
		p := c.p
		t.Run(c.name(), func(t *testing.T) {
			refs := c.compute(t)
			nsg := p.DK / 32
			slots := p.NTokens
			if p.NSeqs == 1 {
				slots += 2 // a capture buffer longer than the draft
			}
			var first []byte // decode's output and state
			for _, order := range []msl.Order{msl.Forward, msl.Reverse} {
				for _, entry := range append(decodeFamily(nsg), Prefill) {
					r := kernelRun{entry: entry, p: p, in: refs.In, captureSlots: slots, order: order}.run(t)
					what := fmt.Sprintf("%s (%v)", entry, order)
					r.checkAgainst(t, what, p, refs)
					r.checkTraffic(t, what, p, isCapture(entry), false)
					if entry == Prefill {
						continue
					}
					if first == nil {
						first = r.allBytes()
					} else if !bytes.Equal(r.allBytes(), first) {
						t.Errorf("%s: output and state are not bit-identical to %s (forward)", what, Decode(nsg))
					}
				}
			}
			// state_in and state_out as one buffer.
			for _, entry := range append(decodeFamily(nsg), Prefill) {
				r := kernelRun{entry: entry, p: p, in: refs.In, inPlace: true, captureSlots: p.NTokens, order: msl.Reverse}.run(t)
				what := entry + " in place"
				r.checkAgainst(t, what, p, refs)
				r.checkTraffic(t, what, p, isCapture(entry), true)
				if entry != Prefill && !bytes.Equal(r.allBytes(), first) {
					t.Errorf("%s: not bit-identical to the separate-buffer run", what)
				}
			}
		})
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
				checkGolden(t, entry, r, gc)
			}
		})
	}
}

func checkGolden(t *testing.T, what string, r runResult, gc golden.Case) {
	t.Helper()
	cmps := []struct {
		what      string
		got, want []float32
	}{
		{"output vs HF", r.Output, gc.Output},
		{"state vs HF", r.State, gc.StateOut},
		{"output vs float64 loop", r.Output, gc.OutputF64},
		{"state vs float64 loop", r.State, gc.StateOutF64},
	}
	if r.Capture != nil && gc.Capture != nil {
		cmps = append(cmps, struct {
			what      string
			got, want []float32
		}{"capture vs HF", r.Capture, gc.Capture})
	}
	for _, c := range cmps {
		if e := cpuref.MaxRelErr(c.got, c.want); !(e <= boundGolden) {
			t.Errorf("%s: %s: relative error %.3g, bound %g", what, c.what, e, boundGolden)
		}
	}
}
