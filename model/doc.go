// Package model runs a whole language model on a Metal device: Qwen3-Next,
// Qwen3.5 and Qwen3 (dense or mixture of experts), from HF or mlx-community
// checkpoint folders (package checkpoint), following cpuref.Model64's
// recipe op by op (SPEC section 14) with the kernels of packages ops and
// gdn.
//
// # Loading
//
// Load (or New, from an opened checkpoint) makes one no-copy buffer over
// each memory-mapped safetensors file (mtl.Device.NewBufferOverMemory) and
// views the weights at their offsets: nothing is read or copied until the
// GPU reads it. A tensor the kernels cannot take as stored is copied, and
// Model.CopiedBytes says how much: Qwen3-Next's in_proj_qkvz and in_proj_ba
// (their rows permuted once into the layer core's order), the hybrids'
// q_proj (its [query | gate] rows per head regrouped so that the query and
// the gate are two dense products), experts stored one tensor each (stacked
// into one; mlx-lm's switch_mlp is taken in place), and a small tensor of a
// type a kernel insists on (conv1d and the gated norm's weight in the
// activation type, A_log and dt_bias in float32). Weights are never widened.
//
// Activations are of the checkpoint's type (bf16, f16 or f32; an MLX
// checkpoint's scales' type), the residual stream float32, and norms, the
// router's softmax, attention's softmax and the recurrence compute in
// float32, as HF does; Options.F32Activations makes every activation
// float32 (a reference run).
//
// # Caches and passes
//
// A Session holds the caches of Options.Slots sequences: per attention
// layer a KV cache of MaxLen positions per slot, per linear-attention
// layer the conv and recurrent states (gdn.StatePool), slot for slot.
// Session.Prefill feeds a prompt in passes of Options.Chunk tokens;
// Session.Decode feeds one token to each of several sequences in one
// pass. A pass is one command buffer and one compute encoder: the
// embedding, every layer (norms fused with the residual adds, the
// projections, q/k norm and RoPE, the KV append and attention, or the
// whole Gated DeltaNet core, then the dense or MoE MLP), the final norm
// and the lm_head (for a prefill, of the last token only). A decode pass
// runs the Gated DeltaNet core in one dispatch (gdn.Kernels.DecodeCore); a
// prefill pass of n tokens runs gdn.Kernels.PrefillCore's kernel (the
// chunked prefill from gdn.ChunkedMinTokens tokens on) for the first n-1
// and the decode core for the last, which moves the conv state the
// prefill wrote apart back into the slot's (so a Chunk of 65 or more puts
// long prompts through the chunked kernel).
//
// # Generation
//
// Session.Generate streams a sequence's tokens as an iter.Seq2: greedy or
// sampled on the device (ops.Kernels.Sample), each decode step one command
// buffer whose sampled token is written into the buffer the next step's
// embedding reads, so that up to Options.InFlight steps are committed
// ahead and the host never waits between them; stop tokens (the config's
// eos and the caller's), a token budget and a context end it.
//
// # Serving
//
// A Batcher (Model.NewBatcher) serves concurrent generations by
// continuous batching: one goroutine owns a Session and runs steps, each
// one command buffer holding at most one prefill chunk of a joining
// sequence and one decode pass over every running one; requests join
// between steps and leave when they stop. A request's tokens do not
// depend on what runs beside it: with temperature 0 they are its tokens
// run alone through Session.Generate, bit for bit, as each row of a
// decode pass computes exactly as it would alone (the products of more
// than ops.MatVecMaxRows rows run as matvecs in groups of that many, at
// the price of reading the weights once per group) and is sampled with
// its own seed and step. Prefill chunks are not packed with decode rows
// in one pass, on purpose: a decode row run through the prefill path
// computes with other kernels and rounds differently. With
// BatchOptions.PrefixSlots, the caches after a prompt's last multiple of
// Options.Chunk are kept, and a later prompt that begins with them starts
// from a device copy and prefills only the rest, in the same chunks, so
// its outputs are unchanged.
package model
