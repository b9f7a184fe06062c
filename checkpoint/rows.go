package checkpoint

import "fmt"

// Heads is the head layout of a linear-attention layer.
type Heads struct {
	DK, DV           int // head sizes of q and k, and of v
	NKHeads, NVHeads int // key and value heads; NVHeads a multiple of NKHeads
}

func (h Heads) validate() error {
	if h.DK <= 0 || h.DV <= 0 || h.NKHeads <= 0 || h.NVHeads <= 0 {
		return fmt.Errorf("checkpoint: heads %+v: every size must be > 0", h)
	}
	if h.NVHeads%h.NKHeads != 0 {
		return fmt.Errorf("checkpoint: heads %+v: NVHeads is not a multiple of NKHeads", h)
	}
	return nil
}

// ConvDim is the width of mixed_qkv: 2 n_k_heads D_k + n_v_heads D_v.
func (h Heads) ConvDim() int { return 2*h.NKHeads*h.DK + h.NVHeads*h.DV }

// QKVZRows returns, for every row of the projection puremetal's core
// reads (mixed_qkv: q of every key head, k of every key head, v of every
// value head; then z of every value head), the row of Qwen3-Next's
// in_proj_qkvz it is.
func QKVZRows(h Heads) ([]int, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	r := h.NVHeads / h.NKHeads
	group := 2*h.DK + 2*r*h.DV // rows of one key head in in_proj_qkvz
	rows := make([]int, 0, h.ConvDim()+h.NVHeads*h.DV)
	for part := 0; part < 2; part++ { // q, then k
		for kh := 0; kh < h.NKHeads; kh++ {
			for d := 0; d < h.DK; d++ {
				rows = append(rows, kh*group+part*h.DK+d)
			}
		}
	}
	for part := 0; part < 2; part++ { // v, then z
		for kh := 0; kh < h.NKHeads; kh++ {
			for e := 0; e < r*h.DV; e++ {
				rows = append(rows, kh*group+2*h.DK+part*r*h.DV+e)
			}
		}
	}
	return rows, nil
}

// BARows returns, for every row of b (n_v_heads) then a (n_v_heads), the
// row of Qwen3-Next's in_proj_ba it is.
func BARows(h Heads) ([]int, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	r := h.NVHeads / h.NKHeads
	rows := make([]int, 0, 2*h.NVHeads)
	for part := 0; part < 2; part++ { // b, then a
		for kh := 0; kh < h.NKHeads; kh++ {
			for j := 0; j < r; j++ {
				rows = append(rows, kh*2*r+part*r+j)
			}
		}
	}
	return rows, nil
}

// Permute returns the rows of a row-major matrix w (cols columns) in the
// order rows gives: row i of the result is row rows[i] of w. Elements are
// of any type (float32 weights, float64 references, raw words).
func Permute[E any](w []E, cols int, rows []int) ([]E, error) {
	if cols <= 0 || len(w)%cols != 0 {
		return nil, fmt.Errorf("checkpoint: %d elements are not rows of %d columns", len(w), cols)
	}
	n := len(w) / cols
	if len(rows) != n {
		return nil, fmt.Errorf("checkpoint: %d row indices for a matrix of %d rows", len(rows), n)
	}
	out := make([]E, 0, len(w))
	for i, r := range rows {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("checkpoint: row index %d at %d is outside 0..%d", r, i, n-1)
		}
		out = append(out, w[r*cols:(r+1)*cols]...)
	}
	return out, nil
}
