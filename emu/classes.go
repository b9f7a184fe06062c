package emu

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/puremetal/puremetal/objc"
)

// classes holds the Objective-C classes of the emulated device. Each
// answers the subset of one Metal protocol that package mtl sends, with
// Apple's selectors, argument types and ownership rules (new* results are
// owned by the caller; commandBuffer, computeCommandEncoder,
// blitCommandEncoder, name, label, functionNames and error results are
// autoreleased). A class's methods are in the file named for it
// (device.go, buffer.go, library.go, function.go, pipeline.go,
// commandqueue.go, commandbuffer.go, computecommandencoder.go,
// blitcommandencoder.go, compileoptions.go), each named after the class
// and the selector it answers.
var classes struct {
	once sync.Once
	err  error

	device, buffer, library, function, pipeline objc.Class
	queue, commandBuffer, encoder, options      objc.Class
	blitEncoder, constantValues                 objc.Class

	// Shared events (event.go), binary archives (archive.go), capture
	// (capture.go).
	sharedEvent, listener             objc.Class
	binaryArchive, archiveDescriptor  objc.Class
	pipelineDescriptor                objc.Class
	captureManager, captureDescriptor objc.Class
	captureScope                      objc.Class
}

// fsel holds the selectors the emulated objects send to Foundation objects
// and to compile options.
var fsel struct {
	addObject                  objc.SEL `sel:"addObject:" types:"v@:@"`
	initWithDomainCodeUserInfo objc.SEL `sel:"initWithDomain:code:userInfo:" types:"@@:@q@"`
	dictionaryWithObjectForKey objc.SEL `sel:"dictionaryWithObject:forKey:" types:"@@:@@"`
	languageVersion            objc.SEL `sel:"languageVersion" types:"Q@:"`
	mathMode                   objc.SEL `sel:"mathMode" types:"q@:"`
	fastMathEnabled            objc.SEL `sel:"fastMathEnabled" types:"c@:"`
	alloc                      objc.SEL `sel:"alloc" types:"@@:"`
	preprocessorMacros         objc.SEL `sel:"preprocessorMacros" types:"@@:"`
	keyEnumerator              objc.SEL `sel:"keyEnumerator" types:"@@:"`
	nextObject                 objc.SEL `sel:"nextObject" types:"@@:"`
	objectForKey               objc.SEL `sel:"objectForKey:" types:"@@:@"`
	stringValue                objc.SEL `sel:"stringValue" types:"@@:"`
	url                        objc.SEL `sel:"url" types:"@@:"`
	fileSystemRepresentation   objc.SEL `sel:"fileSystemRepresentation" types:"r*@:"`
	path                       objc.SEL `sel:"path" types:"@@:"` // GNUstep's NSURL lacks fileSystemRepresentation
	computeFunction            objc.SEL `sel:"computeFunction" types:"@@:"`
	binaryArchives             objc.SEL `sel:"binaryArchives" types:"@@:"`
	count                      objc.SEL `sel:"count" types:"Q@:"`
	objectAtIndex              objc.SEL `sel:"objectAtIndex:" types:"@@:Q"`
	retain                     objc.SEL `sel:"retain" types:"@@:"` // sent by csrc/imps.c's recording
}

var fselTable = objc.NewSelectorTable(&fsel)

func registerClasses() error {
	classes.once.Do(func() { classes.err = doRegisterClasses() })
	return classes.err
}

// m builds a Method that autoreleases an object before it runs, as Metal's
// implementations may (see autoreleasing).
func m(sel, types string, fn any) objc.Method {
	return objc.Method{Sel: sel, Types: types, Fn: autoreleasing(fn)}
}

// plain builds a Method that runs fn as it is: -dealloc, which runs on
// release, and the encoders' methods, which a program sends once per
// dispatch and wraps in a pool per command buffer, if at all.
func plain(sel, types string, fn any) objc.Method { return objc.Method{Sel: sel, Types: types, Fn: fn} }

// autoreleasing returns fn preceded by the autorelease of a new object.
// An Apple implementation of any Metal method may autorelease objects;
// sent from a thread with no autorelease pool open, they leak, and the
// thread of a Go program has none unless the program opens one. The
// emulated device makes that visible on Linux: sent with no pool open, its
// methods leak an object and GNUstep prints "autorelease called without
// pool" on stderr.
func autoreleasing(fn any) any {
	v := reflect.ValueOf(fn)
	return reflect.MakeFunc(v.Type(), func(args []reflect.Value) []reflect.Value {
		nsObject.New().Autorelease()
		return v.Call(args)
	}).Interface()
}

// mi builds a Method implemented in C (csrc/imps.c).
func mi(sel, types string, imp objc.IMP) objc.Method {
	return objc.Method{Sel: sel, Types: types, IMP: imp}
}

// classDef is one class of the emulated device: the field of classes it
// fills, the name it is registered under, and its instance and class
// methods. Every class also answers -dealloc (see dealloc).
type classDef struct {
	class *objc.Class
	name  string
	// apple marks a class of Apple's Metal framework, rather than a
	// protocol's implementation: a program makes one with [[cls alloc]
	// init] or a class method. Apple's systems have it; the emulated
	// device registers it only where the runtime has no class by that name.
	apple        bool
	methods      []objc.Method
	classMethods []objc.Method
}

// classDefs lists the classes of the emulated device.
func classDefs() []classDef {
	setLabel := m("setLabel:", "v@:@", setLabel)
	label := m("label", "@@:", label)
	return []classDef{
		{class: &classes.device, name: "PuremetalEmulatedDevice", methods: []objc.Method{
			m("name", "@@:", deviceName),
			m("registryID", "Q@:", deviceRegistryID),
			mi("maxThreadsPerThreadgroup", "{MTLSize=QQQ}@:", support.maxThreadsPerThreadgroup),
			m("hasUnifiedMemory", "c@:", deviceHasUnifiedMemory),
			m("recommendedMaxWorkingSetSize", "Q@:", deviceRecommendedMaxWorkingSetSize),
			m("maxBufferLength", "Q@:", deviceMaxBufferLength),
			m("supportsFamily:", "c@:q", deviceSupportsFamily),
			m("newCommandQueue", "@@:", deviceNewCommandQueue),
			m("newBufferWithLength:options:", "@@:QQ", deviceNewBufferWithLengthOptions),
			m("newBufferWithBytes:length:options:", "@@:^vQQ", deviceNewBufferWithBytesLengthOptions),
			m("newBufferWithBytesNoCopy:length:options:deallocator:", "@@:^vQQ@?", deviceNewBufferWithBytesNoCopyLengthOptionsDeallocator),
			m("newLibraryWithSource:options:error:", "@@:@@^@", deviceNewLibraryWithSourceOptionsError),
			m("newComputePipelineStateWithFunction:error:", "@@:@^@", deviceNewComputePipelineStateWithFunctionError),
			m("newSharedEvent", "@@:", deviceNewSharedEvent),
			m("newBinaryArchiveWithDescriptor:error:", "@@:@^@", deviceNewBinaryArchiveWithDescriptorError),
			m("newComputePipelineStateWithDescriptor:options:reflection:error:", "@@:@Q^@^@", deviceNewComputePipelineStateWithDescriptorOptionsReflectionError),
		}},
		{class: &classes.buffer, name: "PuremetalEmulatedBuffer", methods: []objc.Method{
			m("contents", "^v@:", bufferContents),
			m("length", "Q@:", bufferLength),
			mi("didModifyRange:", "v@:{_NSRange=QQ}", support.didModifyRange),
			setLabel, label,
		}},
		{class: &classes.library, name: "PuremetalEmulatedLibrary", methods: []objc.Method{
			m("newFunctionWithName:", "@@:@", libraryNewFunctionWithName),
			m("newFunctionWithName:constantValues:error:", "@@:@@^@", libraryNewFunctionWithNameConstantValuesError),
			m("functionNames", "@@:", libraryFunctionNames),
		}},
		{class: &classes.function, name: "PuremetalEmulatedFunction", methods: []objc.Method{
			m("name", "@@:", functionName),
		}},
		{class: &classes.pipeline, name: "PuremetalEmulatedComputePipelineState", methods: []objc.Method{
			m("maxTotalThreadsPerThreadgroup", "Q@:", pipelineMaxTotalThreadsPerThreadgroup),
			m("threadExecutionWidth", "Q@:", pipelineThreadExecutionWidth),
		}},
		{class: &classes.queue, name: "PuremetalEmulatedCommandQueue", methods: []objc.Method{
			m("commandBuffer", "@@:", queueCommandBuffer),
		}},
		{class: &classes.commandBuffer, name: "PuremetalEmulatedCommandBuffer", methods: []objc.Method{
			m("computeCommandEncoder", "@@:", commandBufferComputeCommandEncoder),
			m("blitCommandEncoder", "@@:", commandBufferBlitCommandEncoder),
			m("commit", "v@:", commandBufferCommit),
			m("waitUntilCompleted", "v@:", commandBufferWaitUntilCompleted),
			m("status", "Q@:", commandBufferStatus),
			m("error", "@@:", commandBufferError),
			mi("GPUStartTime", "d@:", support.gpuStartTime),
			mi("GPUEndTime", "d@:", support.gpuEndTime),
			m("addScheduledHandler:", "v@:@?", commandBufferAddScheduledHandler),
			m("addCompletedHandler:", "v@:@?", commandBufferAddCompletedHandler),
			m("encodeSignalEvent:value:", "v@:@Q", commandBufferEncodeSignalEventValue),
			m("encodeWaitForEvent:value:", "v@:@Q", commandBufferEncodeWaitForEventValue),
			setLabel, label,
		}},
		{class: &classes.sharedEvent, name: "PuremetalEmulatedSharedEvent", methods: []objc.Method{
			m("signaledValue", "Q@:", sharedEventSignaledValue),
			m("setSignaledValue:", "v@:Q", sharedEventSetSignaledValue),
			m("notifyListener:atValue:block:", "v@:@Q@?", sharedEventNotifyListenerAtValueBlock),
			setLabel, label,
		}},
		{class: &classes.listener, name: "MTLSharedEventListener", apple: true, methods: []objc.Method{
			m("init", "@@:", listenerInit),
		}},
		{class: &classes.binaryArchive, name: "PuremetalEmulatedBinaryArchive", methods: []objc.Method{
			m("addComputePipelineFunctionsWithDescriptor:error:", "c@:@^@", binaryArchiveAddComputePipelineFunctionsWithDescriptorError),
			m("serializeToURL:error:", "c@:@^@", binaryArchiveSerializeToURLError),
			setLabel, label,
		}},
		{class: &classes.archiveDescriptor, name: "MTLBinaryArchiveDescriptor", apple: true, methods: []objc.Method{
			m("init", "@@:", binaryArchiveDescriptorInit),
			m("setUrl:", "v@:@", binaryArchiveDescriptorSetURL),
			m("url", "@@:", binaryArchiveDescriptorURL),
		}},
		{class: &classes.pipelineDescriptor, name: "MTLComputePipelineDescriptor", apple: true, methods: []objc.Method{
			m("init", "@@:", computePipelineDescriptorInit),
			m("setComputeFunction:", "v@:@", computePipelineDescriptorSetComputeFunction),
			m("computeFunction", "@@:", computePipelineDescriptorComputeFunction),
			m("setBinaryArchives:", "v@:@", computePipelineDescriptorSetBinaryArchives),
			m("binaryArchives", "@@:", computePipelineDescriptorBinaryArchives),
		}},
		// The shared capture manager comes from +sharedCaptureManager.
		{class: &classes.captureManager, name: "MTLCaptureManager", apple: true, methods: []objc.Method{
			m("supportsDestination:", "c@:q", captureManagerSupportsDestination),
			m("startCaptureWithDescriptor:error:", "c@:@^@", captureManagerStartCaptureWithDescriptorError),
			m("stopCapture", "v@:", captureManagerStopCapture),
			m("isCapturing", "c@:", captureManagerIsCapturing),
			m("newCaptureScopeWithCommandQueue:", "@@:@", captureManagerNewCaptureScopeWithCommandQueue),
		}, classMethods: []objc.Method{
			m("sharedCaptureManager", "@@:", captureManagerSharedCaptureManager),
		}},
		{class: &classes.captureDescriptor, name: "MTLCaptureDescriptor", apple: true, methods: []objc.Method{
			m("init", "@@:", captureDescriptorInit),
			m("setCaptureObject:", "v@:@", captureDescriptorSetCaptureObject),
			m("captureObject", "@@:", captureDescriptorCaptureObject),
			m("setDestination:", "v@:q", captureDescriptorSetDestination),
			m("destination", "q@:", captureDescriptorDestination),
			m("setOutputURL:", "v@:@", captureDescriptorSetOutputURL),
			m("outputURL", "@@:", captureDescriptorOutputURL),
		}},
		{class: &classes.captureScope, name: "PuremetalEmulatedCaptureScope", methods: []objc.Method{
			m("beginScope", "v@:", captureScopeBeginScope),
			m("endScope", "v@:", captureScopeEndScope),
			setLabel, label,
		}},
		{class: &classes.encoder, name: "PuremetalEmulatedComputeCommandEncoder", methods: []objc.Method{
			// Recorded in C (recording.go), answered in Go when not recorded.
			mi("setComputePipelineState:", "v@:@", support.setComputePipelineState),
			mi("setBuffer:offset:atIndex:", "v@:@QQ", support.setBufferOffsetAtIndex),
			mi("setBuffers:offsets:withRange:", "v@:^@^Q{_NSRange=QQ}", support.setBuffersOffsetsWithRange),
			mi("setBytes:length:atIndex:", "v@:^vQQ", support.setBytesLengthAtIndex),
			mi("setThreadgroupMemoryLength:atIndex:", "v@:QQ", support.setThreadgroupMemoryLengthAtIndex),
			mi("dispatchThreadgroups:threadsPerThreadgroup:", "v@:{MTLSize=QQQ}{MTLSize=QQQ}", support.dispatchThreadgroups),
			mi("dispatchThreads:threadsPerThreadgroup:", "v@:{MTLSize=QQQ}{MTLSize=QQQ}", support.dispatchThreads),
			mi("memoryBarrierWithScope:", "v@:Q", support.memoryBarrierWithScope),
			plain("endEncoding", "v@:", encoderEndEncoding),
		}},
		{class: &classes.blitEncoder, name: "PuremetalEmulatedBlitCommandEncoder", methods: []objc.Method{
			plain("synchronizeResource:", "v@:@", blitEncoderSynchronizeResource),
			plain("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", "v@:@Q@QQ", blitEncoderCopyFromBufferSourceOffsetToBufferDestinationOffsetSize),
			plain("endEncoding", "v@:", blitEncoderEndEncoding),
		}},
		{class: &classes.options, name: "MTLCompileOptions", apple: true, methods: []objc.Method{
			m("init", "@@:", optionsInit),
			m("setLanguageVersion:", "v@:Q", optionsSetLanguageVersion),
			m("languageVersion", "Q@:", optionsLanguageVersion),
			m("setMathMode:", "v@:q", optionsSetMathMode),
			m("mathMode", "q@:", optionsMathMode),
			m("setFastMathEnabled:", "v@:c", optionsSetFastMathEnabled),
			m("fastMathEnabled", "c@:", optionsFastMathEnabled),
			m("setPreprocessorMacros:", "v@:@", optionsSetPreprocessorMacros),
			m("preprocessorMacros", "@@:", optionsPreprocessorMacros),
		}},
		{class: &classes.constantValues, name: "MTLFunctionConstantValues", apple: true, methods: []objc.Method{
			m("init", "@@:", constantValuesInit),
			m("setConstantValue:type:atIndex:", "v@:^vQQ", constantValuesSetConstantValueTypeAtIndex),
			m("setConstantValue:type:withName:", "v@:^vQ@", constantValuesSetConstantValueTypeWithName),
		}},
	}
}

func doRegisterClasses() error {
	if err := objc.Load(); err != nil {
		return err
	}
	if err := loadSupport(); err != nil {
		return err
	}
	nsObject = objc.GetClass("NSObject")
	if nsObject == 0 {
		return fmt.Errorf("emu: the Objective-C runtime has no NSObject class")
	}
	fselTable.Register()

	dealloc := plain("dealloc", "v@:", dealloc)
	for _, c := range classDefs() {
		if c.apple && objc.GetClass(c.name) != 0 {
			continue
		}
		cls, err := objc.RegisterClass(c.name, nsObject, append(c.methods, dealloc))
		if err != nil {
			return err
		}
		*c.class = cls
		if len(c.classMethods) > 0 {
			if err := objc.AddClassMethods(cls, c.classMethods); err != nil {
				return err
			}
		}
	}
	return nil
}
