package checkpoint

import (
	"slices"
	"testing"
)

// TestRows checks the permutations on a small layout written out by hand:
// two key heads, r = 2, D_k = 1, D_v = 1. in_proj_qkvz per key head is
// [q, k, v0, v1, z0, z1] (6 rows), in_proj_ba [b0, b1, a0, a1].
func TestRows(t *testing.T) {
	h := Heads{DK: 1, DV: 1, NKHeads: 2, NVHeads: 4}
	rows, err := QKVZRows(h)
	if err != nil {
		t.Fatal(err)
	}
	// q0 q1 | k0 k1 | v(kh0: 2 3, kh1: 8 9) | z(kh0: 4 5, kh1: 10 11)
	if want := []int{0, 6, 1, 7, 2, 3, 8, 9, 4, 5, 10, 11}; !slices.Equal(rows, want) {
		t.Errorf("QKVZRows = %v, want %v", rows, want)
	}
	ba, err := BARows(h)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 4, 5, 2, 3, 6, 7}; !slices.Equal(ba, want) {
		t.Errorf("BARows = %v, want %v", ba, want)
	}
	big := Heads{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32}
	rows, err = QKVZRows(big)
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Sorted(slices.Values(rows))
	for i, r := range sorted {
		if r != i {
			t.Fatalf("QKVZRows of %+v is not a permutation (sorted[%d] = %d)", big, i, r)
		}
	}
	if _, err := QKVZRows(Heads{DK: 1, DV: 1, NKHeads: 3, NVHeads: 4}); err == nil {
		t.Error("QKVZRows took 4 value heads over 3 key heads")
	}
	if _, err := Permute([]float32{1, 2, 3}, 2, []int{0}); err == nil {
		t.Error("Permute took 3 elements as rows of 2")
	}
	if _, err := Permute([]float32{1, 2, 3, 4}, 2, []int{0, 2}); err == nil {
		t.Error("Permute took a row index past the end")
	}
	got, err := Permute([]float32{1, 2, 3, 4}, 2, []int{1, 0})
	if err != nil || !slices.Equal(got, []float32{3, 4, 1, 2}) {
		t.Errorf("Permute = %v, %v; want [3 4 1 2]", got, err)
	}
}
