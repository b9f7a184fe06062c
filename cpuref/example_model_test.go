package cpuref_test

import (
	"fmt"
	"slices"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/cpuref"
)

// Greedy decoding with the float64 reference: a prompt's prefill, then one
// token at a time through the caches. The checkpoint is the golden set's
// tiny Qwen3; the tokens printed are the truth's greedy path (golden.json).
func ExampleModel64() {
	ck, err := checkpoint.Open("../testdata/golden/hf-models/qwen3_dense_bf16")
	if err != nil {
		fmt.Println(err)
		return
	}
	md, err := cpuref.NewModel64(ck) // widens every weight: the files can go
	ck.Close()
	if err != nil {
		fmt.Println(err)
		return
	}
	cache := md.NewCache()
	vocab := md.Config.VocabSize
	logits, err := md.Forward(cache, []int32{762, 1554, 503, 391, 565})
	var out []int
	for len(out) < 6 && err == nil {
		last := logits[len(logits)-vocab:]
		next := slices.Index(last, slices.Max(last))
		out = append(out, next)
		logits, err = md.Forward(cache, []int32{int32(next)})
	}
	fmt.Println(out, err)
	// Output: [1869 1869 620 194 1274 808] <nil>
}
