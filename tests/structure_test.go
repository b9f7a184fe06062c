package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/kernels"
)

// structure is what the emulator's counters say about one dispatch, in
// the units the structural table compares.
type structure struct {
	kernel string
	tokens int
	// state bytes (state_in loaded, state_out stored) and SPEC section 8's
	// floor: the state once in and once out, in its own type
	stateBytes, floor uint64
	// segments of the state's loads (binding 5) and stores (7 and, for
	// capture, 9), and of q and k (0, 1)
	stateLoads, stateStores, qk msl.Segments
	simdGroups                  uint64  // SIMD-groups of the dispatch
	rowsPerSIMDGroup            int     // rows of S one SIMD-group holds
	stepsPerToken               float64 // shuffle steps per token of one SIMD-group: all dependent
	barriersPerToken            float64 // threadgroup barriers per token of one threadgroup
	private, tgMemory           int     // emulator stack bytes per thread, bytes per threadgroup
	array                       int     // bytes of the largest private array of the kernel's source
	threadgroups, threads       int     // threadgroups, threads per threadgroup
}

// stepsPerTokenRow is the shuffle steps per token and row of S: a
// SIMD-group's steps shared by the rows it holds.
func (s structure) stepsPerTokenRow() float64 { return s.stepsPerToken / float64(s.rowsPerSIMDGroup) }

func measureStructure(name string, k kernel, p spec.Params, c msl.Counters, rowsPerSIMDGroup int) structure {
	tg := c.Threadgroups[0] * c.Threadgroups[1] * c.Threadgroups[2]
	per := c.ThreadsPerThreadgroup[0] * c.ThreadsPerThreadgroup[1] * c.ThreadsPerThreadgroup[2]
	sgs := uint64(tg * ((per + 31) / 32))
	s := structure{
		kernel: name, tokens: p.NTokens,
		stateBytes: c.Loaded[bindStateIn] + c.Stored[bindStateOut],
		floor:      uint64(2 * p.StateLen() * p.State.Size()),
		stateLoads: c.Loads[bindStateIn], stateStores: c.Stores[bindStateOut],
		qk:               c.Loads[0].Add(c.Loads[1]),
		simdGroups:       sgs,
		rowsPerSIMDGroup: rowsPerSIMDGroup,
		stepsPerToken:    float64(c.ShuffleSteps()) / float64(sgs) / float64(p.NTokens),
		barriersPerToken: float64(c.Barriers) / float64(tg) / float64(p.NTokens),
		private:          c.PrivateBytes, tgMemory: c.ThreadgroupMemory,
		threadgroups: tg, threads: per,
	}
	if k.capture {
		s.stateStores = s.stateStores.Add(c.Stores[bindCapture])
	}
	return s
}

// structureKernel is one kernel of the structural table, with the rows of
// S one of its SIMD-groups holds.
type structureKernel struct {
	k    kernel
	rows int
	file string // the source defining it
	new  bool   // of the packed layout
}

// largestPrivateArray returns the bytes of the largest float array a
// kernel source (with its preludes) declares in private memory at D_k =
// 128: NSG = 4, and the numbers the source #defines.
func largestPrivateArray(t *testing.T, file string) int {
	t.Helper()
	src := regexp.MustCompile(`//[^\n]*`).ReplaceAllString(kernels.Source(file), "")
	defined := map[string]int{"NSG": 4}
	for _, m := range regexp.MustCompile(`(?m)^#define\s+(\w+)\s+(\d+)\s*$`).FindAllStringSubmatch(src, -1) {
		defined[m[1]], _ = strconv.Atoi(m[2])
	}
	decl := regexp.MustCompile(`\bfloat\s+\w+\s*\[([^\]]+)\]\s*;`)
	largest := 0
	for _, m := range decl.FindAllStringSubmatch(src, -1) {
		n := 1
		for _, f := range strings.Split(m[1], "*") {
			f = strings.TrimSpace(f)
			if v, ok := defined[f]; ok {
				n *= v
				continue
			}
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: private array [%s]: cannot evaluate %q", file, m[1], f)
			}
			n *= v
		}
		largest = max(largest, 4*n)
	}
	if largest == 0 {
		t.Fatalf("%s: no private array found", file)
	}
	return largest
}

// TestEmulatedStructure measures, on the emulated device with segment
// counting, every kernel at Qwen3.5's shape (16 key heads, 32 value heads,
// D_k = D_v = 128, bf16 activations, f32 state): a decode step (one token)
// of the decode and capture kernels with the step given and fused, and a
// window of 32 tokens (fused) of the seq and prefill kernels (the chunked
// prefill included: 4 lanes per row, 8 rows per SIMD-group). It logs the side-by-side
// table (go test ./tests -run TestEmulatedStructure -v) and asserts the
// packed layout's targets:
//
//   - state traffic exactly SPEC section 8's floor (every kernel);
//   - every state load and store of the packed kernels fully coalesced:
//     each SIMD-group access touches as few 32-byte segments as its bytes
//     need;
//   - shuffle steps per token and row at most half the one-row layout's;
//   - no private array above 256 bytes per thread (the one-row prefill
//     holds a row of S, 512 bytes).
func TestEmulatedStructure(t *testing.T) {
	run := func(t *testing.T, r *rig) {
		var table []structure
		old := map[int]structure{} // the one-row decode kernel, by tokens
		for _, run := range []struct {
			f  spec.Fused
			nt int
		}{{spec.Fused{}, 1}, {spec.FusedAll, 1}, {spec.FusedAll, 32}} {
			f, nt := run.f, run.nt
			{
				p := spec.Params{
					Shape:      spec.Shape{DK: 128, DV: 128, NKHeads: 16, NVHeads: 32, NTokens: nt, NSeqs: 1},
					QScale:     0.0883883476,
					Activation: spec.BF16, State: spec.F32, Fused: f,
				}
				in := typedInputs(t, p, 0x57c0de, false)
				// the legacy kernel first: the one-row layout the others
				// are compared with
				kerns := []structureKernel{
					{kLegacy, 1, kernels.DecodeFile, false}, {kOneRowDecode, 1, kernels.DecodeFile, false},
					{kOneRowCapture, 1, kernels.CaptureFile, false},
					{kPacked, 8, kernels.PackedFile, true}, {kPackedCapture, 8, kernels.PackedFile, true},
				}
				if nt > 1 {
					kerns = []structureKernel{
						{kLegacy, 1, kernels.DecodeFile, false}, {kOneRowSeq, 1, kernels.DecodeFile, false},
						{kPackedSeq, 8, kernels.PackedFile, true},
						{kRecurrent, 32, kernels.PrefillFile, false}, {kChunked, 8, kernels.ChunkedFile, false},
						{kBlocked, 8, kernels.BlockedFile, true},
					}
				}
				for _, sk := range kerns {
					c := *r.run(t, job{kern: sk.k, p: p, in: in}).Counters
					s := measureStructure(fmt.Sprintf("%s %s", sk.k.name, fusedName(f)), sk.k, p, c, sk.rows)
					s.array = largestPrivateArray(t, sk.file)
					table = append(table, s)
					if s.stateBytes != s.floor {
						t.Errorf("%s, %d tokens: %d state bytes, want the floor %d", s.kernel, nt, s.stateBytes, s.floor)
					}
					if sk.k.name == kLegacy.name {
						old[nt] = s
					}
					if !sk.new {
						continue
					}
					for what, seg := range map[string]msl.Segments{"loads": s.stateLoads, "stores": s.stateStores} {
						if seg.Accesses == 0 || seg.Touched32 != seg.Min32 {
							t.Errorf("%s, %d tokens: state %s touch %d segments of 32 bytes in %d SIMD-group accesses, the fewest is %d",
								s.kernel, nt, what, seg.Touched32, seg.Accesses, seg.Min32)
						}
					}
					if c.Untracked != 0 {
						t.Errorf("%s: %d accesses not counted", s.kernel, c.Untracked)
					}
					if o := old[nt]; sk.k.name != kBlocked.name && s.stepsPerTokenRow() > o.stepsPerTokenRow()/2 {
						t.Errorf("%s, %d tokens: %.3g shuffle steps per token and row, more than half the one-row layout's %.3g",
							s.kernel, nt, s.stepsPerTokenRow(), o.stepsPerTokenRow())
					}
					if s.array > 256 {
						t.Errorf("%s: a private array of %d bytes per thread, want at most 256", s.kernel, s.array)
					}
				}
			}
		}
		logStructure(t, table)
	}
	onEmulatedRuns(t, []emuRun{{opts: emu.Options{Order: testdevice.Orders[0].Order, CountSegments: true}}}, run)
}

// logStructure logs the structural table.
func logStructure(t *testing.T, table []structure) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\nQwen3.5 layer: H_k 16, H_v 32, D 128, bf16 activations, f32 state; floor = state in + out = %d bytes\n", table[0].floor)
	fmt.Fprintf(&b, "%-42s %3s %7s %13s %13s %11s %7s %7s %7s %6s %6s %6s %12s\n",
		"kernel", "T", "x floor", "S ld 32/128", "S st 32/128", "qk 32/128", "steps/t", "/t/row", "barr/t", "array", "stack", "tg mem", "grid")
	for _, s := range table {
		fmt.Fprintf(&b, "%-42s %3d %7.3f %6.2f/%6.2f %6.2f/%6.2f %5.2f/%5.2f %7.2f %7.3f %7.3f %6d %6d %6d %5d x %4d\n",
			s.kernel, s.tokens, float64(s.stateBytes)/float64(s.floor),
			s.stateLoads.Ratio32(), s.stateLoads.Ratio128(), s.stateStores.Ratio32(), s.stateStores.Ratio128(),
			s.qk.Ratio32(), s.qk.Ratio128(), s.stepsPerToken, s.stepsPerTokenRow(), s.barriersPerToken, s.array, s.private, s.tgMemory, s.threadgroups, s.threads)
	}
	b.WriteString("S ld, S st: segments of 32 and 128 bytes touched per SIMD-group access of the state, over the fewest its bytes need (1 = fully coalesced);\n")
	b.WriteString("qk 32: the same for q and k at 32 bytes; steps/t: shuffle steps per token of a SIMD-group (simd_sum = 5, simd_shuffle_xor = 1), all dependent;\n")
	b.WriteString("/t/row: per token and row of S; barr/t: threadgroup barriers per token of a threadgroup; array: largest private array per thread (bytes);\n")
	b.WriteString("stack: the emulator's CPU stack per thread (not GPU registers); tg mem: threadgroup memory (bytes); grid: threadgroups x threads\n")
	t.Log(b.String())
}
