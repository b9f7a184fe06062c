package model

import "github.com/puremetal/puremetal/checkpoint"

// Qwen3-Next: in_proj_qkvz and in_proj_ba hold their rows grouped per key
// head; they are permuted once, at load, into the core's order ([mixed_qkv
// | z] and [b | a]) and split by rows. Gated attention.
func init() {
	register(architecture{gatedAttention: true, linearProjections: func(w *weights, h checkpoint.Heads, p string) (qkv, z, b, a linear) {
		rows, err := checkpoint.QKVZRows(h)
		w.fail(err)
		baRows, err := checkpoint.BARows(h)
		w.fail(err)
		if w.err != nil {
			return
		}
		qkvz, ba := w.permuted(p+"in_proj_qkvz.weight", rows), w.permuted(p+"in_proj_ba.weight", baRows)
		if w.err != nil {
			return
		}
		cd, nv := h.ConvDim(), h.NVHeads
		return qkvz.rows(0, cd), qkvz.rows(cd, qkvz.out), ba.rows(0, nv), ba.rows(nv, 2*nv)
	}}, "qwen3_next")
}
