package mtl

import "github.com/puremetal/puremetal/objc"

// sel holds every selector this package sends, registered once. The test
// TestSelectorsAreApples checks each name against Apple's headers.
var sel struct {
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

	// MTLCompileOptions.preprocessorMacros, MTLFunctionConstantValues,
	// specialized functions
	setPreprocessorMacros, dictionaryWithObjectsForKeysCount                                          objc.SEL
	setConstantValueTypeAtIndex, setConstantValueTypeWithName, newFunctionWithNameConstantValuesError objc.SEL

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
var selectorTable = objc.NewSelectorTable(
	objc.SelectorEntry{Name: "name", Dst: &sel.name},
	objc.SelectorEntry{Name: "registryID", Dst: &sel.registryID},
	objc.SelectorEntry{Name: "maxThreadsPerThreadgroup", Dst: &sel.maxThreadsPerThreadgroup},
	objc.SelectorEntry{Name: "hasUnifiedMemory", Dst: &sel.hasUnifiedMemory},
	objc.SelectorEntry{Name: "recommendedMaxWorkingSetSize", Dst: &sel.recommendedMaxWorkingSetSize},
	objc.SelectorEntry{Name: "maxBufferLength", Dst: &sel.maxBufferLength},
	objc.SelectorEntry{Name: "supportsFamily:", Dst: &sel.supportsFamily},
	objc.SelectorEntry{Name: "newCommandQueue", Dst: &sel.newCommandQueue},
	objc.SelectorEntry{Name: "newBufferWithLength:options:", Dst: &sel.newBufferWithLengthOptions},
	objc.SelectorEntry{Name: "newBufferWithBytes:length:options:", Dst: &sel.newBufferWithBytesLengthOptions},
	objc.SelectorEntry{Name: "newBufferWithBytesNoCopy:length:options:deallocator:", Dst: &sel.newBufferWithBytesNoCopy},
	objc.SelectorEntry{Name: "newLibraryWithSource:options:error:", Dst: &sel.newLibraryWithSourceOptionsError},
	objc.SelectorEntry{Name: "newComputePipelineStateWithFunction:error:", Dst: &sel.newComputePipelineStateWithFunc},
	objc.SelectorEntry{Name: "contents", Dst: &sel.contents},
	objc.SelectorEntry{Name: "length", Dst: &sel.length},
	objc.SelectorEntry{Name: "didModifyRange:", Dst: &sel.didModifyRange},
	objc.SelectorEntry{Name: "setLabel:", Dst: &sel.setLabel},
	objc.SelectorEntry{Name: "label", Dst: &sel.label},
	objc.SelectorEntry{Name: "setLanguageVersion:", Dst: &sel.setLanguageVersion},
	objc.SelectorEntry{Name: "setMathMode:", Dst: &sel.setMathMode},
	objc.SelectorEntry{Name: "setFastMathEnabled:", Dst: &sel.setFastMathEnabled},
	objc.SelectorEntry{Name: "newFunctionWithName:", Dst: &sel.newFunctionWithName},
	objc.SelectorEntry{Name: "functionNames", Dst: &sel.functionNames},
	objc.SelectorEntry{Name: "count", Dst: &sel.count},
	objc.SelectorEntry{Name: "objectAtIndex:", Dst: &sel.objectAtIndex},
	objc.SelectorEntry{Name: "maxTotalThreadsPerThreadgroup", Dst: &sel.maxTotalThreadsPerThreadgroup},
	objc.SelectorEntry{Name: "threadExecutionWidth", Dst: &sel.threadExecutionWidth},
	objc.SelectorEntry{Name: "commandBuffer", Dst: &sel.commandBuffer},
	objc.SelectorEntry{Name: "computeCommandEncoder", Dst: &sel.computeCommandEncoder},
	objc.SelectorEntry{Name: "commit", Dst: &sel.commit},
	objc.SelectorEntry{Name: "waitUntilCompleted", Dst: &sel.waitUntilCompleted},
	objc.SelectorEntry{Name: "status", Dst: &sel.status},
	objc.SelectorEntry{Name: "error", Dst: &sel.errorSel},
	objc.SelectorEntry{Name: "GPUStartTime", Dst: &sel.gpuStartTime},
	objc.SelectorEntry{Name: "GPUEndTime", Dst: &sel.gpuEndTime},
	objc.SelectorEntry{Name: "setComputePipelineState:", Dst: &sel.setComputePipelineState},
	objc.SelectorEntry{Name: "setBuffer:offset:atIndex:", Dst: &sel.setBufferOffsetAtIndex},
	objc.SelectorEntry{Name: "setBuffers:offsets:withRange:", Dst: &sel.setBuffersOffsetsWithRange},
	objc.SelectorEntry{Name: "setBytes:length:atIndex:", Dst: &sel.setBytesLengthAtIndex},
	objc.SelectorEntry{Name: "setThreadgroupMemoryLength:atIndex:", Dst: &sel.setThreadgroupMemoryLengthAtIndex},
	objc.SelectorEntry{Name: "dispatchThreadgroups:threadsPerThreadgroup:", Dst: &sel.dispatchThreadgroups},
	objc.SelectorEntry{Name: "dispatchThreads:threadsPerThreadgroup:", Dst: &sel.dispatchThreads},
	objc.SelectorEntry{Name: "memoryBarrierWithScope:", Dst: &sel.memoryBarrierWithScope},
	objc.SelectorEntry{Name: "endEncoding", Dst: &sel.endEncoding},
	objc.SelectorEntry{Name: "setPreprocessorMacros:", Dst: &sel.setPreprocessorMacros},
	objc.SelectorEntry{Name: "dictionaryWithObjects:forKeys:count:", Dst: &sel.dictionaryWithObjectsForKeysCount},
	objc.SelectorEntry{Name: "setConstantValue:type:atIndex:", Dst: &sel.setConstantValueTypeAtIndex},
	objc.SelectorEntry{Name: "setConstantValue:type:withName:", Dst: &sel.setConstantValueTypeWithName},
	objc.SelectorEntry{Name: "newFunctionWithName:constantValues:error:", Dst: &sel.newFunctionWithNameConstantValuesError},
)

// SelectorNames returns the name of every selector the package sends to
// Metal objects, for checking against Apple's headers.
func SelectorNames() []string { return selectorTable.Names() }

func loadSels() { selectorTable.Register() }
