package ops_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// RoPE's frequencies for Qwen3-Next's attention (head_dim 256, partial
// rotary factor 0.25, rope_theta 10,000,000), as HF computes them in
// float32; the RoPE kernel reads them from a buffer.
func ExampleRoPEInvFreq() {
	f := ops.RoPEInvFreq(64, 1e7)
	fmt.Println(len(f), f[0], f[1], f[31])
	// Output: 32 1 0.6042964 1.6548171e-07
}

// A decode loop draws each token on the device: the logits never reach
// the host, the generator keeps no state but the step, and the set of the
// sequence's tokens that the repetition penalty reads is filled once with
// the prompt and then grown by the sampler itself.
func ExampleKernels_Sample() {
	dev, err := mtl.CreateSystemDefaultDevice()
	if errors.Is(err, mtl.ErrNoDevice) {
		dev, err = emu.NewDevice() // no Metal here: the emulated device
	}
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Release()
	k, err := ops.New(dev, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release()
	queue, err := dev.NewCommandQueue()
	if err != nil {
		log.Fatal(err)
	}
	defer queue.Release()

	const vocab = 151936
	view := func(t tensor.ElemType, n int) tensor.View {
		b, err := dev.NewBuffer(n*t.Size(), mtl.ResourceStorageModeShared)
		if err != nil {
			log.Fatal(err)
		}
		return tensor.NewView(b, 0, t, n)
	}
	logits := view(tensor.F32, vocab) // what lm_head writes each step
	tokens := view(tensor.U32, 1)
	seen := view(tensor.U32, ops.SeenWords(vocab))
	defer logits.Buffer.Release()
	defer tokens.Buffer.Release()
	defer seen.Buffer.Release()

	bits := make([]uint32, seen.Len)
	for _, t := range []uint32{151644, 872, 198} { // the prompt's tokens
		bits[t/32] |= 1 << (t % 32)
	}
	if err := tensor.StoreInts(seen, bits); err != nil {
		log.Fatal(err)
	}

	// Qwen's generation_config, with a repetition penalty.
	p := ops.SampleParams{Rows: 1, Vocab: vocab, Temperature: 0.6, TopK: 20, TopP: 0.95, RepetitionPenalty: 1.05, Seed: 42}
	for step := range 3 {
		p.Step = uint32(step)
		err := queue.Run(func(enc *mtl.ComputeCommandEncoder) error {
			// ... the forward pass encodes its dispatches here, the last
			// writing logits, and the next token's embedding lookup reads
			// tokens after the sampler.
			return k.Sample(enc, p, logits, seen, tokens)
		})
		if err != nil {
			log.Fatal(err)
		}
	}
}
