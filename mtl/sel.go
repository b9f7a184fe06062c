package mtl

import "github.com/puremetal/puremetal/objc"

// sel holds every selector this package sends, registered once, each with
// the type encoding of Apple's method. The test TestSelectorsAreApples
// checks each name and encoding against Apple's headers, and each send
// against the encoding.
var sel struct {
	// MTLDevice
	name                             objc.SEL `sel:"name" types:"@@:"`
	registryID                       objc.SEL `sel:"registryID" types:"Q@:"`
	maxThreadsPerThreadgroup         objc.SEL `sel:"maxThreadsPerThreadgroup" types:"{MTLSize=QQQ}@:"`
	hasUnifiedMemory                 objc.SEL `sel:"hasUnifiedMemory" types:"c@:"`
	recommendedMaxWorkingSetSize     objc.SEL `sel:"recommendedMaxWorkingSetSize" types:"Q@:"`
	maxBufferLength                  objc.SEL `sel:"maxBufferLength" types:"Q@:"`
	supportsFamily                   objc.SEL `sel:"supportsFamily:" types:"c@:q"`
	newCommandQueue                  objc.SEL `sel:"newCommandQueue" types:"@@:"`
	newBufferWithLengthOptions       objc.SEL `sel:"newBufferWithLength:options:" types:"@@:QQ"`
	newBufferWithBytesLengthOptions  objc.SEL `sel:"newBufferWithBytes:length:options:" types:"@@:^vQQ"`
	newBufferWithBytesNoCopy         objc.SEL `sel:"newBufferWithBytesNoCopy:length:options:deallocator:" types:"@@:^vQQ@?"`
	newLibraryWithSourceOptionsError objc.SEL `sel:"newLibraryWithSource:options:error:" types:"@@:@@^@"`
	newComputePipelineStateWithFunc  objc.SEL `sel:"newComputePipelineStateWithFunction:error:" types:"@@:@^@"`

	// MTLBuffer
	contents       objc.SEL `sel:"contents" types:"^v@:"`
	didModifyRange objc.SEL `sel:"didModifyRange:" types:"v@:{_NSRange=QQ}"`
	setLabel       objc.SEL `sel:"setLabel:" types:"v@:@"`
	label          objc.SEL `sel:"label" types:"@@:"`

	// MTLCompileOptions
	setLanguageVersion objc.SEL `sel:"setLanguageVersion:" types:"v@:Q"`
	setMathMode        objc.SEL `sel:"setMathMode:" types:"v@:q"`
	setFastMathEnabled objc.SEL `sel:"setFastMathEnabled:" types:"v@:c"`

	// MTLLibrary, MTLFunction, NSArray
	newFunctionWithName objc.SEL `sel:"newFunctionWithName:" types:"@@:@"`
	functionNames       objc.SEL `sel:"functionNames" types:"@@:"`
	count               objc.SEL `sel:"count" types:"Q@:"`
	objectAtIndex       objc.SEL `sel:"objectAtIndex:" types:"@@:Q"`

	// MTLCompileOptions.preprocessorMacros, MTLFunctionConstantValues,
	// specialized functions
	setPreprocessorMacros                  objc.SEL `sel:"setPreprocessorMacros:" types:"v@:@"`
	dictionaryWithObjectsForKeysCount      objc.SEL `sel:"dictionaryWithObjects:forKeys:count:" types:"@@:^@^@Q"`
	setConstantValueTypeAtIndex            objc.SEL `sel:"setConstantValue:type:atIndex:" types:"v@:^vQQ"`
	setConstantValueTypeWithName           objc.SEL `sel:"setConstantValue:type:withName:" types:"v@:^vQ@"`
	newFunctionWithNameConstantValuesError objc.SEL `sel:"newFunctionWithName:constantValues:error:" types:"@@:@@^@"`

	// MTLComputePipelineState
	maxTotalThreadsPerThreadgroup objc.SEL `sel:"maxTotalThreadsPerThreadgroup" types:"Q@:"`
	threadExecutionWidth          objc.SEL `sel:"threadExecutionWidth" types:"Q@:"`

	// MTLCommandQueue, MTLCommandBuffer
	commandBuffer         objc.SEL `sel:"commandBuffer" types:"@@:"`
	computeCommandEncoder objc.SEL `sel:"computeCommandEncoder" types:"@@:"`
	commit                objc.SEL `sel:"commit" types:"v@:"`
	waitUntilCompleted    objc.SEL `sel:"waitUntilCompleted" types:"v@:"`
	status                objc.SEL `sel:"status" types:"Q@:"`
	errorSel              objc.SEL `sel:"error" types:"@@:"`
	gpuStartTime          objc.SEL `sel:"GPUStartTime" types:"d@:"`
	gpuEndTime            objc.SEL `sel:"GPUEndTime" types:"d@:"`

	// MTLComputeCommandEncoder
	setComputePipelineState           objc.SEL `sel:"setComputePipelineState:" types:"v@:@"`
	setBufferOffsetAtIndex            objc.SEL `sel:"setBuffer:offset:atIndex:" types:"v@:@QQ"`
	setBuffersOffsetsWithRange        objc.SEL `sel:"setBuffers:offsets:withRange:" types:"v@:^@^Q{_NSRange=QQ}"`
	setBytesLengthAtIndex             objc.SEL `sel:"setBytes:length:atIndex:" types:"v@:^vQQ"`
	setThreadgroupMemoryLengthAtIndex objc.SEL `sel:"setThreadgroupMemoryLength:atIndex:" types:"v@:QQ"`
	dispatchThreadgroups              objc.SEL `sel:"dispatchThreadgroups:threadsPerThreadgroup:" types:"v@:{MTLSize=QQQ}{MTLSize=QQQ}"`
	dispatchThreads                   objc.SEL `sel:"dispatchThreads:threadsPerThreadgroup:" types:"v@:{MTLSize=QQQ}{MTLSize=QQQ}"`
	memoryBarrierWithScope            objc.SEL `sel:"memoryBarrierWithScope:" types:"v@:Q"`
	endEncoding                       objc.SEL `sel:"endEncoding" types:"v@:"`

	// MTLCommandBuffer, MTLBlitCommandEncoder
	blitCommandEncoder     objc.SEL `sel:"blitCommandEncoder" types:"@@:"`
	synchronizeResource    objc.SEL `sel:"synchronizeResource:" types:"v@:@"`
	copyFromBufferToBuffer objc.SEL `sel:"copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:" types:"v@:@Q@QQ"`
}

var selectorTable = objc.NewSelectorTable(&sel)

func loadSels() {
	selectorTable.Register()
	aselTable.Register()
}
