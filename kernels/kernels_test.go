package kernels

// These tests check the sources and the registry. What the kernels compute
// is checked end to end, through packages mtl and gdn on the emulated
// device and on a GPU, in package tests (../tests): every kernel against
// the CPU references and the golden vectors, bit-identity, capture, and
// memory traffic.

import (
	"regexp"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/emu"
	"github.com/puremetal/puremetal/gdn/spec"
	"github.com/puremetal/puremetal/internal/testdevice"
	"github.com/puremetal/puremetal/mtl"
)

// The sources instantiate their entry points with macros, so the
// functions a compiled library holds are the test: on the emulated device,
// each source compiled as MSL 3.0 (bf16 by hand) and 3.1 (MSL's bfloat)
// defines exactly the entry points registered under it.
func TestEntryPointsAreDefinedInTheirSource(t *testing.T) {
	names := EntryPoints()
	ops := 0
	for _, s := range OpsSources() {
		ops += len(s.Entries())
	}
	if want := 9*(19+10) + ops; len(names) != want {
		t.Fatalf("%d entry points, want %d (3 activation * 3 state types * (prefill and chunked prefill with and without the layer core, and 5 kernels, decode and the layer core, * NSG 1, 2, 4, and 5 packed kernels, the blocked prefill with and without the core, * NSG 2, 4), and %d of the other sources): %v", len(names), want, ops, names)
	}
	dev := testdevice.Emulated(t, emu.Options{})
	for _, lang := range []mtl.LanguageVersion{mtl.LanguageVersion3_0, mtl.LanguageVersion3_1} {
		defined := map[string]string{}
		for _, f := range SourceFiles() {
			src := Source(f)
			if src == "" {
				t.Fatalf("Source(%q) is empty", f)
			}
			lib, err := dev.NewLibraryWithSource(src, mtl.CompileOptions{LanguageVersion: lang})
			if err != nil {
				t.Fatalf("%s, MSL %#x: %v", f, lang, err)
			}
			for _, name := range lib.FunctionNames() {
				defined[name] = f
			}
			lib.Release()
		}
		for _, name := range names {
			want, _ := SourceFile(name)
			if got := defined[name]; got != want {
				t.Errorf("MSL %#x: %s defined in %q, registered under %q", lang, name, got, want)
			}
		}
		if len(defined) != len(names) {
			t.Errorf("MSL %#x: the sources define %d entry points, the registry knows %d", lang, len(defined), len(names))
		}
	}
}

func TestSourceHasPreludeAndLineDirectives(t *testing.T) {
	for _, s := range OpsSources() {
		src := Source(s.File)
		for _, part := range append(append([]string{ElemFile}, s.Headers...), s.File) {
			if !strings.Contains(src, `#line 1 "`+part+`"`) {
				t.Errorf("Source(%q) lacks %s", s.File, part)
			}
		}
		if strings.Contains(src, "struct gdn_params") {
			t.Errorf("Source(%q) has the GDN prelude", s.File)
		}
	}
	for _, f := range SourceFiles()[:len(SourceFiles())-len(OpsSources())] {
		src := Source(f)
		for _, want := range []string{`#line 1 "` + CommonFile + `"`, "struct gdn_params", `#line 1 "` + f + `"`} {
			if !strings.Contains(src, want) {
				t.Errorf("Source(%q) lacks %q", f, want)
			}
		}
		if i, j := strings.Index(src, "struct gdn_params"), strings.Index(src, `#line 1 "`+f+`"`); i > j {
			t.Errorf("Source(%q): the prelude is not in front", f)
		}
	}
	for _, f := range []string{PackedFile, BlockedFile, CoreFile} {
		src := Source(f)
		if i, j := strings.Index(src, `#line 1 "`+PackedCommonFile+`"`), strings.Index(src, `#line 1 "`+f+`"`); i < 0 || i > j {
			t.Errorf("Source(%q): %s is not in front", f, PackedCommonFile)
		}
	}
	for _, f := range []string{CoreFile, ChunkedFile, BlockedFile, PrefillFile} {
		src := Source(f)
		if i, j := strings.Index(src, `#line 1 "`+CoreCommonFile+`"`), strings.Index(src, `#line 1 "`+f+`"`); i < 0 || i > j {
			t.Errorf("Source(%q): %s is not in front", f, CoreCommonFile)
		}
	}
	for _, bad := range []string{"", CommonFile, PackedCommonFile, CoreCommonFile, "nope.metal", "kernels.go"} {
		if got := Source(bad); got != "" {
			t.Errorf("Source(%q) = %d bytes, want empty", bad, len(got))
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Decode(1), "gated_delta_net_decode_f32_1"},
		{DecodeSeq(2), "gated_delta_net_decode_seq_f32_2"},
		{DecodeLegacy(4), "gated_delta_net_decode_legacy_f32_4"},
		{DecodeCapture(2), "gated_delta_net_decode_capture_f32_2"},
		{DecodePackedOf(spec.BF16, spec.F32, 4), "gated_delta_net_decode_packed_bf16_f32_4"},
		{DecodePackedSeqOf(spec.F32, spec.F32, 2), "gated_delta_net_decode_packed_seq_f32_2"},
		{DecodePackedCaptureOf(spec.F16, spec.BF16, 4), "gated_delta_net_decode_packed_capture_f16_bf16_4"},
		{PrefillBlockedOf(spec.F32, spec.F32, 4), "gated_delta_net_prefill_blocked_f32_4"},
		{MatVecOf(spec.BF16, spec.F32), "matvec_bf16_f32"},
		{MatMulOf(spec.F32, spec.F32), "matmul_f32_f32"},
		{GatherMatVecOf(spec.F16, spec.BF16), "gather_matvec_f16_bf16"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if _, ok := SourceFile("gated_delta_net_decode_f32_3"); ok {
		t.Errorf("NSG 3 is not a kernel")
	}
	if _, ok := SourceFile(DecodePackedOf(spec.F32, spec.F32, 1)); ok {
		t.Errorf("the packed kernels do not take D_k = 32")
	}
}

// The decode family shares one per-token step, and every variant uses the
// same exp; the prefill kernel uses metal::exp too.
func TestOneExpEverywhere(t *testing.T) {
	expCall := regexp.MustCompile(`\b(fast::|precise::|metal::)?exp2?\(`)
	for _, f := range append(SourceFiles(), CommonFile, PackedCommonFile, CoreCommonFile) {
		for _, m := range expCall.FindAllStringSubmatch(code(t, f), -1) {
			if m[0] != "metal::exp(" {
				t.Errorf("%s calls %q, want metal::exp", f, m[0])
			}
		}
	}
	if strings.Contains(code(t, DecodeFile), "exp(") || strings.Contains(code(t, CaptureFile), "exp(") {
		t.Errorf("the decode family computes the gate outside gdn_lane_step")
	}
}

// code returns a source file without its // comments.
func code(t *testing.T, file string) string {
	t.Helper()
	src, err := files.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`//[^\n]*`).ReplaceAllString(string(src), "")
}

func TestLanguageForMacOSVersion(t *testing.T) {
	for _, c := range []struct {
		product string
		want    mtl.LanguageVersion
	}{
		{"13.6.1", mtl.LanguageVersion3_0},
		{"13.0", mtl.LanguageVersion3_0},
		{"14.0", mtl.LanguageVersion3_1},
		{"14.7.2", mtl.LanguageVersion3_1},
		{"15.1", mtl.LanguageVersion3_1},
		{"26.1", mtl.LanguageVersion3_1},
		{"9", mtl.LanguageVersion3_0},
		{"", mtl.LanguageVersion3_0},
		{"unknown", mtl.LanguageVersion3_0},
	} {
		if got := macOSLanguage(c.product); got != c.want {
			t.Errorf("macOS %q: language version %#x, want %#x", c.product, got, c.want)
		}
	}
}

// bfloat needs both MSL 3.1 and an Apple-silicon GPU.
func TestLanguageForDevice(t *testing.T) {
	for _, c := range []struct {
		system   mtl.LanguageVersion
		appleGPU bool
		want     mtl.LanguageVersion
	}{
		{mtl.LanguageVersion3_1, true, mtl.LanguageVersion3_1},
		{mtl.LanguageVersion3_1, false, mtl.LanguageVersion3_0},
		{mtl.LanguageVersion3_0, true, mtl.LanguageVersion3_0},
		{mtl.LanguageVersion3_0, false, mtl.LanguageVersion3_0},
	} {
		if got := languageFor(c.system, c.appleGPU); got != c.want {
			t.Errorf("system %#x, Apple GPU %v: %#x, want %#x", c.system, c.appleGPU, got, c.want)
		}
	}
	// The emulated device is an Apple7-family GPU on a system that
	// compiles MSL 3.1.
	if got := LanguageVersion(testdevice.Emulated(t, emu.Options{})); got != mtl.LanguageVersion3_1 {
		t.Errorf("emulated device: %#x, want 3.1", got)
	}
}

func TestTypedNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{PrefillOf(spec.F32, spec.F32), "gated_delta_net_f32"},
		{PrefillOf(spec.BF16, spec.F32), "gated_delta_net_bf16_f32"},
		{PrefillOf(spec.F32, spec.F16), "gated_delta_net_f32_f16"},
		{DecodeOf(spec.F32, spec.F32, 4), "gated_delta_net_decode_f32_4"},
		{DecodeOf(spec.BF16, spec.F32, 4), "gated_delta_net_decode_bf16_f32_4"},
		{DecodeSeqOf(spec.F16, spec.BF16, 1), "gated_delta_net_decode_seq_f16_bf16_1"},
		{DecodeLegacyOf(spec.BF16, spec.BF16, 2), "gated_delta_net_decode_legacy_bf16_bf16_2"},
		{DecodeCaptureOf(spec.F32, spec.BF16, 4), "gated_delta_net_decode_capture_f32_bf16_4"},
		{DecodeOf(spec.F32, spec.F32, 3), "gated_delta_net_decode_f32_3"}, // no such kernel
		{DecodeOf(spec.ElemType(7), spec.F32, 1), "gated_delta_net_decode_ElemType(7)_f32_1"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = DecodeOf(spec.BF16, spec.F16, 4) }); n != 0 {
		t.Errorf("DecodeOf allocates %v times", n)
	}
}
