package msl

import "testing"

// Shader logging (MSL 3.2's <metal_logging>), as MLX's kernels use it: a
// program-scope os_log in constant memory, its log methods with format
// arguments, and os_log_default. The calls compile and print nothing, as
// in a library compiled without MTLCompileOptions.enableLogging; the
// kernel around them runs.
func TestShaderLogging(t *testing.T) {
	src := `#include <metal_stdlib>
#include <metal_logging>
using namespace metal;

namespace lib {
using os_log = metal::os_log;
}
constant lib::os_log logger("com.example.kernels", "step");

kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    if (i == 3) {
        logger.log_debug("thread %u of %d", i, 40);
        logger.log_info("info");
        logger.log_error("error %f", 1.5f);
        logger.log_fault("fault");
        logger.log("default");
        os_log_default.log_debug("default log, thread %u", i);
    }
    out[i] = i + 1;
}
`
	lib := compileT(t, src, CompileOptions{LanguageVersion: 0x30002})
	wantU32(t, "kernel with logging", runU32(t, lib, "k", 40), func(i int) uint32 { return uint32(i + 1) })
}
