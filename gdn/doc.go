// Package gdn dispatches puremetal's Gated DeltaNet kernels on a Metal
// compute encoder: prefill (with the automatic choice between the
// token-by-token and the chunked kernel), decode (with the automatic
// choice between the decode and seq kernels), seq, legacy and decode with
// per-token state capture for speculative decoding.
//
// # Kernel choice
//
// Two layouts of the state exist. One row of S per SIMD-group (each lane 4
// cells at D_k = 128, two 32-lane simd_sum per row and token; prefill: one
// row per thread) takes every D_k of 32, 64 and 128. The packed layout
// holds 8 rows per SIMD-group, 4 lanes per row, 32 cells per lane at D_k =
// 128, and sums a row with two simd_shuffle_xor steps; it takes D_k 64 and
// 128 with D_v a multiple of 32. [Kernels.Decode], [Kernels.DecodeWithCapture]
// and [Kernels.Prefill] pick the packed kernels where they apply (the
// blocked prefill stages 16 tokens at a time in threadgroup memory) and the
// one-row kernels otherwise; [Kernels.Encode] runs any [Kernel] by name.
// Within a layout decode, seq and capture give the same bytes; across
// layouts the summation order differs, within the float32 bounds.
// [PrefillKernel], [DecodeKernel] and [CaptureKernel] say which kernel each
// picks, [EntryPoint] which pipeline that kernel runs, and
// [Kernels.Prepare] makes the pipeline ahead of the first dispatch.
//
// # The recurrence
//
// One state S (D_v rows, D_k columns) per sequence and value head. For each
// token, in order:
//
//	alpha = exp(-g)                           decay first
//	S     = alpha * S
//	delta = beta * (v - S k)                  from the decayed state
//	S     = S + delta k^T
//	out   = scale * S q
//
// that is S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
// (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025).
//
// # Chunked prefill
//
// [Kernels.PrefillChunked] (and [Kernels.Prefill] from [ChunkedMinTokens]
// tokens on) computes the same recurrence in its WY, or UT transform,
// form: a chunk of n tokens at a time, with S_0 the state before it,
// Gamma[r][s] = exp(-(g_{s+1} + ... + g_r)) and e_r = exp(-(g_0 + ... + g_r)),
//
//	(I + A) U = diag(beta) (V - diag(e) K S_0^T),  A[r][s] = beta_r Gamma[r][s] k_r.k_s, s < r
//	O   = scale (diag(e) Q S_0^T + (Gamma o Q K^T) U)
//	S_n = e_{n-1} S_0 + U^T diag(Gamma[n-1][.]) K
//
// so the state is carried from chunk to chunk and a chunk's tokens meet
// only in n x n matrices. Its results agree with the token-by-token
// kernels within the float32 bound, not bit for bit.
//
// # Gate convention
//
// The kernels take g with alpha = exp(-g); in real models g >= 0, computed
// as g = exp(A_log) * softplus(a + dt_bias). Converting from other
// libraries:
//
//   - flash-linear-attention and HF transformers (Qwen3-Next) pass
//     g_fla = log(alpha): use g = -g_fla.
//   - mlx-lm passes alpha itself: use g = -log(alpha).
//
// # Head mapping
//
// With n_v_heads = r * n_k_heads, value head h reads q and k from key head
// h / r under [Block] (HF transformers, MLX / mlx-lm,
// flash-linear-attention: repeat_interleave; the zero value), or
// h % n_k_heads under [Tiled] (GGUF files converted for llama.cpp).
//
// # Memory layouts
//
// Innermost dimension first:
//
//	Q, K               [D_k, n_k_heads, n_tokens, n_seqs]          Params.Activation
//	V, Output          [D_v, n_v_heads, n_tokens, n_seqs]          Params.Activation
//	G, Beta            [n_v_heads, n_tokens, n_seqs]               Params.Activation
//	StateIn, StateOut  [D_k, D_v, n_v_heads, n_seqs]               Params.State (row i of S: D_k elements)
//	Capture            [D_k, D_v, n_v_heads, n_tokens, n_seqs]     Params.State
//	ALog, DtBias       [n_v_heads]                                 f32 (Params.Fused.Gate only)
//
// StateIn and StateOut may be the same view (in-place update); apart from
// that, no view a kernel writes (Output, StateOut, Capture) may share a
// byte with another view, since the result would then depend on the order
// the GPU runs its threads in.
//
// # Element types
//
// Every kernel takes f32, f16 or bf16 activations (q, k, v, the output and
// the gate inputs) and an f32 (the default), f16 or bf16 state, in any
// combination, each a kernel variant of its own. Loads widen to f32
// exactly, the recurrence runs in f32 with the state in registers, and
// each store rounds to nearest even once: the output at write-back, the
// state when it is written. A 16-bit state halves the bytes a decode step
// moves. bf16 is MSL's bfloat where the kernels are compiled as language
// version 3.1 (macOS 14 on an Apple-silicon GPU) and converted by hand
// elsewhere (see kernels.LanguageVersion), with the same results.
//
// # The fused step
//
// A Qwen3-Next / Qwen3.5 layer hands its recurrent core raw q and k, v,
// the raw gate projections a and b, and the layer constants A_log and
// dt_bias. [spec.Fused] lets the kernel compute, per token, in f32:
//
//	L2Norm  q^ = q / sqrt(sum_j q_j^2 + 1e-6), k^ likewise (per key head)
//	Gate    g = exp(A_log[h]) * softplus(a + dt_bias[h]); G holds a
//	Beta    beta = 1 / (1 + exp(-b)); Beta holds b
//
// So the views keep the names of what the recurrence uses, and hold its
// inputs when the kernel computes them: with Fused.Gate, Buffers.G is a
// (in_proj_a's output), not g; with Fused.Beta, Buffers.Beta is b, not
// beta.
//
// with torch's softplus (x above 20, else log(1 + e^x)). With all three
// ([spec.FusedAll]) one dispatch does a layer's whole recurrent step for a
// token or a window: no normalisation, gate, sigmoid or conversion kernel
// before it. From a Qwen3-Next checkpoint (HF layout): ALog and DtBias
// hold the layer's linear_attn.A_log and linear_attn.dt_bias ([n_v_heads],
// as f32); in_proj_ba's output holds, per key head, r = n_v_heads /
// n_k_heads values of b and then r of a, which in [n_v_heads] order
// (block mapping) are what Beta and G hold; q, k and v are the short
// convolution's output (after its SiLU), not normalised; QScale is
// 1/sqrt(D_k).
//
// # The layer core
//
// A linear-attention layer computes, between its input projections and
// out_proj, the depthwise causal convolution (K = 4) of mixed_qkv with its
// conv state and SiLU, split into q, k and v; the step of Params.Fused;
// the gated RMSNorm of each value head's output with z (silu or sigmoid
// gate, eps from the layer): the layer core (SPEC.md section 13).
// Params.Core ([spec.Core]; [QwenCore] for Qwen3-Next and Qwen3.5) says
// which parts a dispatch runs: the convolution, the norm, both or neither
// (the zero value, every call as it was). [CoreBuffers] are the views
// those parts read and write, beside [Buffers]. The dispatchers that take
// them mirror those without the core:
//
//	without the core   with it               runs
//	Kernels.Decode     Kernels.DecodeCore    a token or a window (capture too): the core kernel
//	Kernels.Prefill    Kernels.PrefillCore   a prompt: the prefill kernel for its tokens
//	Kernels.Encode     Kernels.EncodeCore    the prefill kernel named
//
// [Kernels.DecodeCore] is the core kernel (its pipeline
// [DecodeCoreEntryPoint], its rules [ValidateCore], its rollback after a
// speculative window [RollbackCore]). One threadgroup owns whole value
// heads of one sequence, so the norm's reduction stays in the dispatch; it
// takes any number of tokens.
//
// The prefills run the same core through [Kernels.EncodeCore] (or
// [Kernels.PrefillCore], which picks one as [Kernels.Prefill] does; which
// one, [PrefillCoreKernel] says) with [ValidateCoreOn]'s rules: the chunked
// prefill (the fast path for long prompts) and the token-by-token prefill
// on their own threadgroups, which hold a value head's whole row set, and
// the blocked prefill on the core kernel's grid (its own splits a head's
// rows over D_v / 32 threadgroups, which the norm's sum cannot cross), in
// blocks of 16 tokens. Each convolves a key head's q and k in every one of
// its value heads' threadgroups and writes its conv state from the first
// only, so with grouped heads ConvStateOut must be apart from ConvStateIn
// there (Kernels.DecodeCore takes it in place by running one threadgroup
// per key head, and Kernels.PrefillCore encodes Kernels.DecodeCore when
// given it). The one-row decode kernels do not take the core: they split
// a head's rows over D_v / NSG threadgroups, and one threadgroup of one
// row per SIMD-group would need 32 D_v threads (4096 at D_v = 128, against
// 1024). Every other call refuses a non-zero Params.Core.
//
// # Serving: state slots and packed sequences
//
// A server batching sequences continuously keeps every layer's states in a
// pool and runs each step as one dispatch over sequences that live in
// arbitrary slots of it (vLLM's ssm_state_indices, flash-linear-attention's
// cu_seqlens):
//
//   - Shape.NSlots > 0: StateIn and StateOut hold [D_k, D_v, n_v_heads,
//     n_slots] and Buffers.Slots (int32 [n_seqs], [I32View]) names the
//     state each sequence reads and writes; StateOut may be StateIn (the
//     pool updated in place). A negative slot is padding: the sequence is
//     skipped and nothing of it is written, not even its output. Every
//     kernel takes a pool.
//   - Shape.Varlen: the tokens of all sequences are packed along one
//     axis, NTokens is their total, and Buffers.CuSeqlens (int32
//     [n_seqs+1]) gives sequence s the tokens CuSeqlens[s] to
//     CuSeqlens[s+1]-1; Capture holds the state after every packed token
//     i at capture[..., i]. An empty sequence is skipped like padding:
//     its state stays as it is (into a StateOut apart from StateIn,
//     nothing of it is written).
//     The prefill, seq and capture kernels take packed sequences
//     ([Kernels.Decode] picks seq for them).
//
// When the slot index or cu_seqlens is in shared storage, the dispatcher
// reads it before encoding (the values it holds then) and rejects a slot
// at or beyond n_slots, a slot two sequences name (they would race on one
// state), and a cu_seqlens that does not start at 0, decreases, or does
// not end at NTokens. In private (or managed) storage the CPU cannot see
// what the GPU will, so the kernels guard themselves: a sequence whose
// slot is not below n_slots, or whose cu_seqlens range decreases or passes
// NTokens, is skipped like padding, and no index the host did not check is
// ever dereferenced. Two sequences naming one slot there leave that state
// undefined.
//
// Limits: the kernels index the states with 64-bit offsets, so a pool may
// pass 2^32 elements (8192 Qwen3.5 states of 32 heads of 128 x 128 are
// 2^32); n_slots is at most [spec.MaxSlots] = 2^31, as slots are int32.
// Every other buffer (q, k, v, the output, the gates, capture) is indexed
// with 32 bits and must stay below 2^32 elements, and packed tokens below
// 2^31 (cu_seqlens is int32).
//
// [NewStatePool] makes such a pool for a model's layers and hands its
// slots out ([StatePool.Acquire], zeroed for a fresh sequence) and back
// ([StatePool.Free]), with the layer core's conv states beside the states
// when Params.Core.Conv is set; [NewBuffers] with AllocOptions.State set to
// a layer's pool view makes the rest of a step's views, the slot index and
// cu_seqlens among them.
//
// [Rollback] ends a speculative window for a whole batch: one blit encoder
// makes every sequence's state the state after its own last accepted
// token.
//
// # Validation
//
// Every dispatcher checks its arguments before it encodes anything, and a
// bad argument is an error wrapping [ErrInvalidArgument] that names the
// argument and the numbers, and a [*spec.ArgumentError] (errors.As gives
// its Arg and Detail); nothing invalid reaches the GPU. A released device
// or buffer also matches mtl.ErrReleased, and a view in a buffer of
// another device than the one given to [New] is refused naming both.
//
// # Allocation
//
// [NewBuffers] makes every view a Params implies, each in a buffer of its
// own exactly as long, zero-filled; [Allocation.Release] releases them.
//
// # The contract
//
// "SPEC section N" in this documentation is section N of SPEC.md at the
// repository root, the contract the kernels, this package and package
// cpuref implement; where SPEC.md's first sections and this documentation
// differ, this documentation and that of package kernels are current.
package gdn
