package model

import (
	"fmt"
	"sort"

	"github.com/puremetal/puremetal/checkpoint"
)

// An architecture is what sets one model family apart from the others
// in the shared machinery: how its linear-attention layers' input
// projections are stored, and whether its attention has an output gate.
// Each family registers one in a file of its own.
type architecture struct {
	// gatedAttention: q_proj emits per head [query | gate] and the
	// attention's output is multiplied by sigmoid(gate) (the hybrids).
	gatedAttention bool
	// linearProjections loads a linear-attention layer's input
	// projections in the layer core's row order: mixed_qkv, z, b, a.
	// prefix ends in "linear_attn.".
	linearProjections func(w *weights, h checkpoint.Heads, prefix string) (qkv, z, b, a linear)
}

var architectures = map[string]architecture{}

func register(a architecture, modelTypes ...string) {
	for _, t := range modelTypes {
		architectures[t] = a
	}
}

// archOf returns the architecture of c's model type.
func archOf(c *checkpoint.Config) (architecture, error) {
	a, ok := architectures[c.ModelType]
	if !ok {
		var known []string
		for t := range architectures {
			known = append(known, t)
		}
		sort.Strings(known)
		return a, fmt.Errorf("%w: model type %q; this package runs %v", ErrUnsupported, c.ModelType, known)
	}
	return a, nil
}
