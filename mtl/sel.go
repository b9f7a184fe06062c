package mtl

import (
	"sync"

	"github.com/puremetal/puremetal/objc"
)

// sel holds every selector this package sends, registered once. The test
// TestSelectorsAreApples checks each name against Apple's headers.
var sel struct {
	once sync.Once

	// MTLDevice
	name, registryID, maxThreadsPerThreadgroup, hasUnifiedMemory      objc.SEL
	recommendedMaxWorkingSetSize, maxBufferLength, supportsFamily     objc.SEL
	newCommandQueue, newBufferWithLengthOptions                       objc.SEL
	newBufferWithBytesLengthOptions, newBufferWithBytesNoCopy         objc.SEL
	newLibraryWithSourceOptionsError, newComputePipelineStateWithFunc objc.SEL

	// MTLBuffer
	contents, length, didModifyRange, setLabel, label objc.SEL

	// MTLCompileOptions
	setLanguageVersion, setMathMode, setFastMathEnabled objc.SEL

	// MTLLibrary, MTLFunction, NSArray
	newFunctionWithName, functionNames, count, objectAtIndex objc.SEL

	// MTLComputePipelineState
	maxTotalThreadsPerThreadgroup, threadExecutionWidth objc.SEL

	// MTLCommandQueue, MTLCommandBuffer
	commandBuffer, computeCommandEncoder, commit, waitUntilCompleted objc.SEL
	status, errorSel, gpuStartTime, gpuEndTime                       objc.SEL

	// MTLComputeCommandEncoder
	setComputePipelineState, setBufferOffsetAtIndex, setBuffersOffsetsWithRange objc.SEL
	setBytesLengthAtIndex, setThreadgroupMemoryLengthAtIndex                    objc.SEL
	dispatchThreadgroups, dispatchThreads, memoryBarrierWithScope, endEncoding  objc.SEL
}

// selectorNames lists every selector the package sends, in the order of
// the fields they fill.
var selectorNames = []struct {
	name string
	dst  *objc.SEL
}{
	{"name", &sel.name},
	{"registryID", &sel.registryID},
	{"maxThreadsPerThreadgroup", &sel.maxThreadsPerThreadgroup},
	{"hasUnifiedMemory", &sel.hasUnifiedMemory},
	{"recommendedMaxWorkingSetSize", &sel.recommendedMaxWorkingSetSize},
	{"maxBufferLength", &sel.maxBufferLength},
	{"supportsFamily:", &sel.supportsFamily},
	{"newCommandQueue", &sel.newCommandQueue},
	{"newBufferWithLength:options:", &sel.newBufferWithLengthOptions},
	{"newBufferWithBytes:length:options:", &sel.newBufferWithBytesLengthOptions},
	{"newBufferWithBytesNoCopy:length:options:deallocator:", &sel.newBufferWithBytesNoCopy},
	{"newLibraryWithSource:options:error:", &sel.newLibraryWithSourceOptionsError},
	{"newComputePipelineStateWithFunction:error:", &sel.newComputePipelineStateWithFunc},
	{"contents", &sel.contents},
	{"length", &sel.length},
	{"didModifyRange:", &sel.didModifyRange},
	{"setLabel:", &sel.setLabel},
	{"label", &sel.label},
	{"setLanguageVersion:", &sel.setLanguageVersion},
	{"setMathMode:", &sel.setMathMode},
	{"setFastMathEnabled:", &sel.setFastMathEnabled},
	{"newFunctionWithName:", &sel.newFunctionWithName},
	{"functionNames", &sel.functionNames},
	{"count", &sel.count},
	{"objectAtIndex:", &sel.objectAtIndex},
	{"maxTotalThreadsPerThreadgroup", &sel.maxTotalThreadsPerThreadgroup},
	{"threadExecutionWidth", &sel.threadExecutionWidth},
	{"commandBuffer", &sel.commandBuffer},
	{"computeCommandEncoder", &sel.computeCommandEncoder},
	{"commit", &sel.commit},
	{"waitUntilCompleted", &sel.waitUntilCompleted},
	{"status", &sel.status},
	{"error", &sel.errorSel},
	{"GPUStartTime", &sel.gpuStartTime},
	{"GPUEndTime", &sel.gpuEndTime},
	{"setComputePipelineState:", &sel.setComputePipelineState},
	{"setBuffer:offset:atIndex:", &sel.setBufferOffsetAtIndex},
	{"setBuffers:offsets:withRange:", &sel.setBuffersOffsetsWithRange},
	{"setBytes:length:atIndex:", &sel.setBytesLengthAtIndex},
	{"setThreadgroupMemoryLength:atIndex:", &sel.setThreadgroupMemoryLengthAtIndex},
	{"dispatchThreadgroups:threadsPerThreadgroup:", &sel.dispatchThreadgroups},
	{"dispatchThreads:threadsPerThreadgroup:", &sel.dispatchThreads},
	{"memoryBarrierWithScope:", &sel.memoryBarrierWithScope},
	{"endEncoding", &sel.endEncoding},
}

// SelectorNames returns the name of every selector the package sends to
// Metal objects, for checking against Apple's headers.
func SelectorNames() []string {
	names := make([]string, len(selectorNames))
	for i, s := range selectorNames {
		names[i] = s.name
	}
	return names
}

func loadSels() {
	sel.once.Do(func() {
		for _, s := range selectorNames {
			*s.dst = objc.RegisterName(s.name)
		}
	})
}
