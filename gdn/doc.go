// Package gdn dispatches puremetal's Gated DeltaNet kernels on a Metal
// compute encoder: prefill, decode (with the automatic choice between the
// decode and seq kernels), seq, legacy and decode with per-token state
// capture for speculative decoding.
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
// Innermost dimension first, all float32:
//
//	Q, K               [D_k, n_k_heads, n_tokens, n_seqs]
//	V, Output          [D_v, n_v_heads, n_tokens, n_seqs]
//	G, Beta            [n_v_heads, n_tokens, n_seqs]
//	StateIn, StateOut  [D_k, D_v, n_v_heads, n_seqs]   (row i of S: D_k floats)
//	Capture            [D_k, D_v, n_v_heads, n_tokens, n_seqs]
//
// StateIn and StateOut may be the same view (in-place update); apart from
// that, no view a kernel writes (Output, StateOut, Capture) may share a
// byte with another view, since the result would then depend on the order
// the GPU runs its threads in.
//
// # Validation
//
// Every dispatcher checks its arguments before it encodes anything, and a
// bad argument is an error wrapping [ErrInvalidArgument] that names the
// argument and the numbers; nothing invalid reaches the GPU.
package gdn
