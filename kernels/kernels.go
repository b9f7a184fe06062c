// Package kernels holds puremetal's Metal Shading Language sources for the
// Gated DeltaNet recurrence, embedded in the binary, and a [Registry] that
// compiles them into compute pipeline states on a device.
//
// There is one source per kernel family:
//
//	gdn_prefill.metal   gated_delta_net_f32
//	gdn_decode.metal    gated_delta_net_decode_f32_{1,2,4}
//	                    gated_delta_net_decode_seq_f32_{1,2,4}
//	                    gated_delta_net_decode_legacy_f32_{1,2,4}
//	gdn_capture.metal   gated_delta_net_decode_capture_f32_{1,2,4}
//
// Each is compiled behind gdn_common.metal, which holds the parameter block
// and the per-token arithmetic shared by the decode family. Package gdn
// validates arguments and dispatches these kernels; the contract they
// implement is the project's SPEC.md.
package kernels

import (
	"embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

//go:embed *.metal
var files embed.FS

// The source files, by name.
const (
	CommonFile  = "gdn_common.metal"  // prelude placed in front of every other source
	PrefillFile = "gdn_prefill.metal" // the prefill kernel
	DecodeFile  = "gdn_decode.metal"  // decode, seq and legacy kernels
	CaptureFile = "gdn_capture.metal" // decode with per-token state capture
)

// Entry-point names of the kernels.
const (
	// Prefill is the prefill kernel: threadgroup (D_v, 1, 1), grid
	// (n_v_heads, n_seqs, 1), D_k and D_v at most 128.
	Prefill = "gated_delta_net_f32"
)

// Decode returns the name of the decode kernel (indices rebuilt every
// token, the choice at n_tokens == 1) for nsg = D_k / 32 in {1, 2, 4}.
func Decode(nsg int) string { return decodeNames.name(nsg) }

// DecodeSeq returns the name of the seq kernel (per-lane pointers advanced
// once per token, the choice at n_tokens >= 2) for nsg in {1, 2, 4}.
func DecodeSeq(nsg int) string { return seqNames.name(nsg) }

// DecodeLegacy returns the name of the legacy decode kernel, the index
// kernel kept for tests and benchmarks, for nsg in {1, 2, 4}.
func DecodeLegacy(nsg int) string { return legacyNames.name(nsg) }

// DecodeCapture returns the name of the decode kernel that also writes the
// state after every token (speculative decoding), for nsg in {1, 2, 4}.
func DecodeCapture(nsg int) string { return captureNames.name(nsg) }

// variants are the names of one decode kernel's entry points, made once so
// that looking one up, on every dispatch, allocates nothing.
type variants struct {
	prefix string
	names  [5]string // by NSG: 1, 2 and 4 are set
}

func newVariants(prefix string) *variants {
	v := &variants{prefix: prefix}
	for _, nsg := range []int{1, 2, 4} {
		v.names[nsg] = prefix + strconv.Itoa(nsg)
	}
	return v
}

// name returns the entry point for nsg; an NSG without a kernel gets the
// name such a kernel would have, which no source defines.
func (v *variants) name(nsg int) string {
	if nsg >= 0 && nsg < len(v.names) && v.names[nsg] != "" {
		return v.names[nsg]
	}
	return v.prefix + strconv.Itoa(nsg)
}

var (
	decodeNames  = newVariants("gated_delta_net_decode_f32_")
	seqNames     = newVariants("gated_delta_net_decode_seq_f32_")
	legacyNames  = newVariants("gated_delta_net_decode_legacy_f32_")
	captureNames = newVariants("gated_delta_net_decode_capture_f32_")
)

// entryFile maps every entry point to the source file that defines it.
var entryFile = func() map[string]string {
	m := map[string]string{Prefill: PrefillFile}
	for _, nsg := range []int{1, 2, 4} {
		m[Decode(nsg)] = DecodeFile
		m[DecodeSeq(nsg)] = DecodeFile
		m[DecodeLegacy(nsg)] = DecodeFile
		m[DecodeCapture(nsg)] = CaptureFile
	}
	return m
}()

// EntryPoints returns the names of every kernel, sorted.
func EntryPoints() []string { return slices.Sorted(maps.Keys(entryFile)) }

// SourceFile returns the name of the source file that defines the entry
// point, and false for an unknown name.
func SourceFile(entry string) (string, bool) {
	f, ok := entryFile[entry]
	return f, ok
}

// SourceFiles returns the names of the kernel sources, prelude excluded.
func SourceFiles() []string {
	return []string{PrefillFile, DecodeFile, CaptureFile}
}

// Source returns the compilable text of a kernel source file: the shared
// prelude followed by the file, each behind a #line directive so that
// compiler messages name the right file and line. It returns "" for a name
// that is not one of [SourceFiles].
func Source(name string) string {
	if name == CommonFile {
		return ""
	}
	body, err := files.ReadFile(name)
	if err != nil {
		return ""
	}
	common, err := files.ReadFile(CommonFile)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("#line 1 %q\n%s\n#line 1 %q\n%s", CommonFile, common, name, body)
}
