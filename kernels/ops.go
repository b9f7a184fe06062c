package kernels

// OpsSource is one source of the model's kernels other than the GDN
// recurrence (matrix products, norms, RoPE, attention, MoE, sampling;
// package ops dispatches them): its file, the headers compiled between
// [ElemFile] and it, and its entry points.
type OpsSource struct {
	File    string
	Headers []string
	Entries func() []string
}

// opsSources lists the model's other kernel sources, one line each.
var opsSources = []OpsSource{
	{File: MatMulFile, Entries: matmulEntries},
	{File: QuantFile, Entries: QuantEntries},
	{File: AttentionFile, Entries: attentionEntries},
	{File: NormFile, Entries: entriesOf(rmsNormNames, rmsNormResidualNames)},
	{File: RoPEFile, Entries: entriesOf(ropeNames)},
	{File: SwiGLUFile, Entries: entriesOf(swigluNames)},
	{File: MoEFile, Headers: []string{RankFile}, Entries: entriesOf(moeRouteNames, moeCombineNames)},
	{File: SampleFile, Headers: []string{RankFile}, Entries: entriesOf(argmaxNames, sampleNames)},
}

// OpsSources returns the sources of the model's other kernels.
func OpsSources() []OpsSource { return append([]OpsSource(nil), opsSources...) }
