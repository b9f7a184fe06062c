package gdn

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/mtl"
)

// fakeContents stands in for the CPU-readable bytes of buffers: buffers
// without an entry are not CPU-readable (private storage).
type fakeContents map[*mtl.Buffer][]byte

func useFakeContents(t *testing.T) fakeContents {
	t.Helper()
	fc := fakeContents{}
	old := cpuContents
	cpuContents = func(b *mtl.Buffer) []byte { return fc[b] }
	t.Cleanup(func() { cpuContents = old })
	return fc
}

// int32View returns an int32 view of vals in a buffer of its own, which
// the CPU reads when shared is set.
func int32View(fb fakeBuffers, fc fakeContents, shared bool, vals ...int32) View {
	b := fb.buffer(4 * len(vals))
	if shared {
		fc[b] = make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(fc[b][4*i:], uint32(v))
		}
	}
	return I32View(b, 0, len(vals))
}

// servingShape is a batch of 4 sequences in a pool of 6 states, with 7
// packed tokens.
var servingShape = Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 7, NSeqs: 4, NSlots: 6, Varlen: true}

// servingKernels take both a state pool and packed tokens.
var servingKernels = []Kernel{KernelPrefill, KernelDecodeSeq, KernelDecodeCapture,
	KernelDecodePackedSeq, KernelDecodePackedCapture, KernelPrefillBlocked}

// servingArgs returns valid arguments for k with a pool and packed tokens
// (the slots and cu_seqlens shared, so that validation reads them).
func servingArgs(fb fakeBuffers, fc fakeContents, k Kernel) (Params, Buffers) {
	p, b := fb.args(k, servingShape)
	b.Slots = int32View(fb, fc, true, 5, -1, 0, 2)
	b.CuSeqlens = int32View(fb, fc, true, 0, 3, 3, 4, 7)
	return p, b
}

func TestValidateServingAccepts(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	for _, k := range servingKernels {
		p, b := servingArgs(fb, fc, k)
		if err := validateServing(k, p, b); err != nil {
			t.Errorf("%v: %v", k, err)
		}
		// Private storage: the values are the kernel's to skip.
		b.Slots = int32View(fb, fc, false, 9, 9, 9, 9)
		b.CuSeqlens = int32View(fb, fc, false, 5, 0, 0, 0, 0)
		if err := validateServing(k, p, b); err != nil {
			t.Errorf("%v, private index buffers: %v", k, err)
		}
	}
	// A pool alone, for every kernel, and a batch larger than fewSeqs.
	for _, k := range allKernels {
		s := shapeFor(k)
		s.NSlots = 40
		s.NSeqs = 35
		p, b := fb.args(k, s)
		slots := make([]int32, s.NSeqs)
		for i := range slots {
			slots[i] = int32(39 - i)
		}
		slots[3] = -1
		b.Slots = int32View(fb, fc, true, slots...)
		if err := validateServing(k, p, b); err != nil {
			t.Errorf("%v, 35 sequences in 40 slots: %v", k, err)
		}
	}
}

func TestValidateServingRejects(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	many := func(repeat int32) []int32 {
		slots := make([]int32, 40)
		for i := range slots {
			slots[i] = int32(i)
		}
		slots[37] = repeat
		return slots
	}
	cases := []struct {
		name  string
		kerns []Kernel
		edit  func(p *Params, b *Buffers)
		want  []string
	}{
		{"slot beyond the pool", servingKernels, func(p *Params, b *Buffers) { b.Slots = int32View(fb, fc, true, 5, -1, 6, 2) },
			[]string{"Slots", "sequence 2 names slot 6", "n_slots = 6"}},
		{"repeated slot", servingKernels, func(p *Params, b *Buffers) { b.Slots = int32View(fb, fc, true, 5, 2, 0, 2) },
			[]string{"Slots", "sequences 1 and 3 both name slot 2"}},
		{"repeated slot, many sequences", servingKernels, func(p *Params, b *Buffers) {
			p.NSeqs, p.NSlots, p.Varlen, p.NTokens = 40, 64, false, 1
			_, *b = fb.args(KernelDecodeSeq, p.Shape)
			b.Slots = int32View(fb, fc, true, many(12)...)
		}, []string{"Slots", "sequences 12 and 37 both name slot 12"}},
		{"padding twice is fine, a repeat after it is not", servingKernels, func(p *Params, b *Buffers) { b.Slots = int32View(fb, fc, true, -1, -1, 4, 4) },
			[]string{"sequences 2 and 3 both name slot 4"}},
		{"slots missing", servingKernels, func(p *Params, b *Buffers) { b.Slots = View{} }, []string{"Slots", "no buffer", "Shape.NSlots > 0"}},
		{"slots without a pool", servingKernels, func(p *Params, b *Buffers) {
			p.NSlots = 0
			_, *b = fb.args(KernelDecodeSeq, p.Shape)
			b.CuSeqlens = int32View(fb, fc, true, 0, 3, 3, 4, 7)
			b.Slots = int32View(fb, fc, true, 0, 1, 2, 3)
		}, []string{"Slots", "set, but not Shape.NSlots > 0"}},
		{"slots f32", servingKernels, func(p *Params, b *Buffers) { b.Slots.Type = F32 }, []string{"Slots", "element type f32, must be i32"}},
		{"slots one short", servingKernels, func(p *Params, b *Buffers) { b.Slots.Len = 3 }, []string{"Slots", "3 elements", "n_seqs = 4"}},
		{"slots beyond the buffer", servingKernels, func(p *Params, b *Buffers) { b.Slots.Offset = 4 }, []string{"Slots", "beyond the buffer"}},
		{"slots released", servingKernels, func(p *Params, b *Buffers) { fb.release(b.Slots.Buffer) }, []string{"Slots", "released"}},
		{"slots under the output", servingKernels, func(p *Params, b *Buffers) {
			b.Slots.Len = 4
			fb.pack(at{&b.Output, 0}, at{&b.Slots, 8})
			fc[b.Slots.Buffer] = make([]byte, 4*b.Output.Len)
		}, []string{"Output: bytes [0, ", "overlap Slots's bytes [8, 24) in the same buffer"}},
		{"cu_seqlens inside the state_out", servingKernels, func(p *Params, b *Buffers) {
			fb.pack(at{&b.StateOut, 0}, at{&b.CuSeqlens, 16})
			fc[b.CuSeqlens.Buffer] = make([]byte, 4*b.StateOut.Len)
		}, []string{"StateOut: bytes [0, ", "overlap CuSeqlens's bytes [16, 36) in the same buffer"}},
		{"cu_seqlens first", servingKernels, func(p *Params, b *Buffers) { b.CuSeqlens = int32View(fb, fc, true, 1, 3, 3, 4, 7) },
			[]string{"CuSeqlens", "cu_seqlens[0] = 1, must be 0"}},
		{"cu_seqlens decreasing", servingKernels, func(p *Params, b *Buffers) { b.CuSeqlens = int32View(fb, fc, true, 0, 3, 2, 4, 7) },
			[]string{"CuSeqlens", "cu_seqlens[2] = 2 is below cu_seqlens[1] = 3", "sequence 1 would have -1 tokens"}},
		{"cu_seqlens last", servingKernels, func(p *Params, b *Buffers) { b.CuSeqlens = int32View(fb, fc, true, 0, 3, 3, 4, 6) },
			[]string{"CuSeqlens", "cu_seqlens[4] = 6, must be Shape.NTokens = 7"}},
		{"cu_seqlens missing", servingKernels, func(p *Params, b *Buffers) { b.CuSeqlens = View{} }, []string{"CuSeqlens", "no buffer", "Shape.Varlen"}},
		{"cu_seqlens without varlen", servingKernels, func(p *Params, b *Buffers) {
			p.Varlen, p.NTokens = false, 2
			_, *b = fb.args(KernelDecodeSeq, p.Shape)
			b.Slots = int32View(fb, fc, true, 5, -1, 0, 2)
			b.CuSeqlens = int32View(fb, fc, true, 0, 1, 2, 3, 4)
		}, []string{"CuSeqlens", "set, but not Shape.Varlen"}},
		{"cu_seqlens n_seqs long", servingKernels, func(p *Params, b *Buffers) { b.CuSeqlens.Len = 4 }, []string{"CuSeqlens", "4 elements", "n_seqs+1 = 5"}},
		{"varlen on the decode kernel", []Kernel{KernelDecode, KernelDecodeLegacy, KernelDecodePacked}, func(p *Params, b *Buffers) {},
			[]string{"Shape.Varlen", "takes n_tokens tokens per sequence"}},
	}
	for _, c := range cases {
		for _, k := range c.kerns {
			p, b := servingArgs(fb, fc, k)
			c.edit(&p, &b)
			checkInvalid(t, fmt.Sprintf("%s (%v)", c.name, k), validateServing(k, p, b), c.want)
		}
	}
}

// TestValidateServingAllocatesNothing checks the host checks of the slot
// and cu_seqlens values: nothing allocated, a small batch or one past
// fewSeqs.
func TestValidateServingAllocatesNothing(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	for _, n := range []int{4, 200} {
		s := Shape{DK: 64, DV: 32, NKHeads: 2, NVHeads: 4, NTokens: 2 * n, NSeqs: n, NSlots: 4096, Varlen: true}
		p, b := fb.args(KernelDecodeSeq, s)
		slots, cu := make([]int32, n), make([]int32, n+1)
		for i := range slots {
			slots[i], cu[i+1] = int32(4095-3*i), int32(2*i+2)
		}
		b.Slots, b.CuSeqlens = int32View(fb, fc, true, slots...), int32View(fb, fc, true, cu...)
		var err error
		if a := testing.AllocsPerRun(50, func() { err = validateServing(KernelDecodeSeq, p, b) }); a != 0 || err != nil {
			t.Errorf("%d sequences: %v allocations (%v)", n, a, err)
		}
	}
}

// TestStatePoolLimits checks the limits of SPEC section 7 with a state
// pool and packed tokens, at the limit and one past it, on buffers that
// are never allocated (fakeBuffers): the states, indexed with 64-bit
// offsets, pass 2^32 elements (a pool of 8192 Qwen3.5 states is 2^32);
// q, k, v, the output, the gates and capture, indexed with 32 bits, stop
// below 2^32;
// the pool stops at spec.MaxSlots.
func TestStatePoolLimits(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	qwen := Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: 1}
	args := func(k Kernel, s Shape) (Params, Buffers) {
		p, b := fb.args(k, s)
		if s.NSlots > 0 {
			b.Slots = int32View(fb, fc, true, int32(s.NSlots-1))
		}
		if s.Varlen {
			b.CuSeqlens = int32View(fb, fc, true, 0, int32(s.NTokens))
		}
		return p, b
	}
	pool := func(n int) Shape { s := qwen; s.NSlots = n; return s }
	packed := func(tokens int) Shape { s := qwen; s.NTokens, s.Varlen = tokens, true; return s }
	for _, c := range []struct {
		name string
		k    Kernel
		s    Shape
		want []string // nil: valid
	}{
		{"pool of 8191 Qwen3.5 states", KernelDecode, pool(8191), nil},
		{"pool of 8192 Qwen3.5 states: 2^32 elements", KernelDecode, pool(8192), nil},
		{"pool of 8193", KernelDecodeSeq, pool(8193), nil},
		{"pool of spec.MaxSlots", KernelPrefill, pool(spec.MaxSlots), nil},
		{"pool of spec.MaxSlots+1", KernelPrefill, pool(spec.MaxSlots + 1), []string{"Shape.NSlots", "2147483649"}},
		{"packed v one token below 2^32", KernelPrefill, packed(1<<20 - 1), nil},
		{"packed v at 2^32", KernelPrefill, packed(1 << 20), []string{"V", "D_v*n_v_heads*n_tokens (packed) = 4294967296", "2^32"}},
		{"packed capture one token below 2^32", KernelDecodeCapture, packed(1<<13 - 1), nil},
		{"packed capture at 2^32", KernelDecodeCapture, packed(1 << 13), []string{"Capture", "D_k*D_v*n_v_heads*n_tokens (packed) = 4294967296"}},
	} {
		var p Params
		var b Buffers
		if c.want != nil && c.s.NSlots > spec.MaxSlots {
			p, b = fb.args(c.k, qwen) // the shape is refused before its buffers are looked at
			p.Shape = c.s
		} else {
			p, b = args(c.k, c.s)
		}
		err := Validate(c.k, p, b)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		checkInvalid(t, c.name, err, c.want)
	}
}

// TestServingDispatchAllocatesNothing checks a whole dispatch with a
// state pool and packed tokens, the host checks of the slots and
// cu_seqlens included, on every kernel that takes them.
func TestServingDispatchAllocatesNothing(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	kk := &Kernels{pipelines: onePipeline{new(mtl.ComputePipelineState)}}
	for _, k := range servingKernels {
		p, b := servingArgs(fb, fc, k)
		b.StateOut = b.StateIn
		var err error
		if n := testing.AllocsPerRun(100, func() { err = kk.dispatch(nopEncoder{}, k, p, b) }); n != 0 || err != nil {
			t.Errorf("%v: %v allocations per dispatch (%v)", k, n, err)
		}
	}
}

// TestServingEncoding checks what a dispatch with a state pool and packed
// tokens binds: the slot index at 12, cu_seqlens at 13, and n_slots and
// varlen in parameter words 9 and 10.
func TestServingEncoding(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	for _, k := range servingKernels {
		kk := &Kernels{pipelines: &fakePipelines{maxThreads: 1024}}
		rec := &recorder{}
		p, b := servingArgs(fb, fc, k)
		if err := kk.dispatch(rec, k, p, b); err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		bound := map[int]*mtl.Buffer{}
		var params []byte
		for _, c := range rec.calls {
			switch c.method {
			case "SetBuffer":
				bound[c.args[2].(int)] = c.args[0].(*mtl.Buffer)
			case "SetBuffers":
				for i, buf := range c.args[0].([]*mtl.Buffer) {
					bound[c.args[2].(int)+i] = buf
				}
			case "SetBytes":
				params = c.args[0].([]byte)
			}
		}
		if bound[12] != b.Slots.Buffer || bound[13] != b.CuSeqlens.Buffer {
			t.Errorf("%v: bound %p at 12 and %p at 13, want the slots %p and cu_seqlens %p", k, bound[12], bound[13], b.Slots.Buffer, b.CuSeqlens.Buffer)
		}
		if len(params) != 48 || binary.LittleEndian.Uint32(params[36:]) != 6 || binary.LittleEndian.Uint32(params[40:]) != 1 {
			t.Errorf("%v: parameter bytes %v, want n_slots 6 and varlen 1 in words 9 and 10", k, params)
		}
	}
}

// BenchmarkServingDispatch measures the host cost of one decode dispatch
// over a batch in a state pool (slots in shared storage, so validation
// reads and checks them): 8 sequences (pairwise check) and 256 (bitset of
// a 4096-slot pool), Qwen3.5's shape.
func BenchmarkServingDispatch(b *testing.B) {
	fb := fakeBuffers{}
	fc := fakeContents{}
	oldInfo, oldContents := bufferInfo, cpuContents
	bufferInfo = func(buf *mtl.Buffer) (int, bool) { return fb[buf].length, true }
	cpuContents = func(buf *mtl.Buffer) []byte { return fc[buf] }
	defer func() { bufferInfo, cpuContents = oldInfo, oldContents }()
	kk := &Kernels{pipelines: onePipeline{new(mtl.ComputePipelineState)}}
	for _, n := range []int{8, 256} {
		s := Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: 1, NSeqs: n, NSlots: 4096}
		p, bufs := fb.args(KernelDecode, s)
		slots := make([]int32, n)
		for i := range slots {
			slots[i] = int32(4095 - 7*i)
		}
		bufs.Slots = int32View(fb, fc, true, slots...)
		bufs.StateOut = bufs.StateIn
		b.Run(fmt.Sprintf("seqs%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := kk.dispatch(nopEncoder{}, KernelDecode, p, bufs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A packed batch whose sequences are all empty (n_tokens 0, cu_seqlens all
// zero) is a valid call for every kernel that takes packed sequences, and
// encodes nothing, so it writes nothing; n_tokens 0 without packed
// sequences, or with cu_seqlens naming tokens, is still refused.
func TestEmptyPackedBatch(t *testing.T) {
	fb := useFakeBuffers(t)
	fc := useFakeContents(t)
	s := servingShape
	s.NTokens = 0
	for _, k := range servingKernels {
		p, b := fb.args(k, s)
		b.Slots = int32View(fb, fc, true, 5, -1, 0, 2)
		b.CuSeqlens = int32View(fb, fc, true, 0, 0, 0, 0, 0)
		if err := Validate(k, p, b); err != nil {
			t.Errorf("%v: %v", k, err)
		}
		pipes := &fakePipelines{maxThreads: 1024}
		rec := &recorder{}
		if err := (&Kernels{pipelines: pipes}).dispatch(rec, k, p, b); err != nil || len(rec.calls) != 0 || len(pipes.asked) != 0 {
			t.Errorf("%v: dispatch returned %v after %d encoder calls and %d pipeline lookups, want nil and none", k, err, len(rec.calls), len(pipes.asked))
		}
		b.CuSeqlens = int32View(fb, fc, true, 0, 0, 1, 1, 1)
		checkInvalid(t, fmt.Sprintf("%v, cu_seqlens naming a token", k), Validate(k, p, b), []string{"CuSeqlens"})
	}
	s.Varlen = false
	p, b := fb.args(KernelPrefill, s)
	checkInvalid(t, "n_tokens 0 without packed sequences", Validate(KernelPrefill, p, b), []string{"Shape.NTokens", "0, must be > 0"})
}
