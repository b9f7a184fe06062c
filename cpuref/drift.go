package cpuref

import (
	"fmt"

	"github.com/puremetal/puremetal/gdn/spec"
)

// Drift is the error of a decode loop against the float64 truth, token by
// token, each figure relative to the largest magnitude of the truth at
// that token (see [MaxRelErr64]), over every sequence and value head.
type Drift struct {
	State  []float64 // [n_tokens]: the state written after token t
	Output []float64 // [n_tokens]: the output of token t
}

// Max returns the largest state and output errors over all tokens.
func (d Drift) Max() (state, output float64) {
	for t := range d.State {
		state, output = max(state, d.State[t]), max(output, d.Output[t])
	}
	return state, output
}

// DecodeDrift measures how a state of type p.State drifts when a model
// decodes p.NTokens tokens one call at a time: each call of [Reference32]
// takes one token, reads the state the previous call wrote (rounded to
// p.State) and writes it again, so a 16-bit state is rounded once per
// token. The truth is [Oracle64] over all tokens at once, whose state is
// never rounded. The inputs are RandomInputs(p, seed): realistic gates and
// L2-normalised q and k (or raw ones, with p.Fused.L2Norm), in the
// activation type.
func DecodeDrift(p spec.Params, seed uint64) (Drift, error) {
	if p.NSlots > 0 || p.Varlen {
		return Drift{}, invalidf("DecodeDrift takes neither a state pool nor packed tokens (shape %v)", p.Shape)
	}
	if p.Core != (spec.Core{}) {
		return Drift{}, invalidf("DecodeDrift measures the recurrence alone, not Params.Core %+v", p.Core)
	}
	in, err := RandomInputs(p, seed)
	if err != nil {
		return Drift{}, err
	}
	truth, err := Oracle64(p, in, true)
	if err != nil {
		return Drift{}, err
	}
	one := p
	one.NTokens = 1
	nt, ns := p.NTokens, p.NSeqs
	token := Inputs{StateIn: in.StateIn, ALog: in.ALog, DtBias: in.DtBias}
	qkw, vw, gw := p.DK*p.NKHeads, p.DV*p.NVHeads, p.NVHeads
	sw := p.DK * p.DV * p.NVHeads
	d := Drift{State: make([]float64, nt), Output: make([]float64, nt)}
	for t := range nt {
		token.Q, token.K = tokenOf(in.Q, qkw, t, nt, ns), tokenOf(in.K, qkw, t, nt, ns)
		token.V = tokenOf(in.V, vw, t, nt, ns)
		token.G, token.Beta = tokenOf(in.G, gw, t, nt, ns), tokenOf(in.Beta, gw, t, nt, ns)
		res, err := Reference32(one, token, false)
		if err != nil {
			return Drift{}, fmt.Errorf("cpuref: token %d: %w", t, err)
		}
		token.StateIn = res.StateOut
		wantState := make([]float64, 0, ns*sw)
		wantOut := make([]float64, 0, ns*vw)
		for s := range ns {
			wantState = append(wantState, truth.Capture[(s*nt+t)*sw:(s*nt+t+1)*sw]...)
			wantOut = append(wantOut, truth.Output[(s*nt+t)*vw:(s*nt+t+1)*vw]...)
		}
		d.State[t] = MaxRelErr64(res.StateOut, wantState)
		d.Output[t] = MaxRelErr64(res.Output, wantOut)
	}
	return d, nil
}

// tokenOf copies token t of every sequence out of x, laid out as [width,
// n_tokens, n_seqs] with nt tokens and ns sequences.
func tokenOf(x []float32, width, t, nt, ns int) []float32 {
	y := make([]float32, 0, width*ns)
	for s := range ns {
		o := (s*nt + t) * width
		y = append(y, x[o:o+width]...)
	}
	return y
}
