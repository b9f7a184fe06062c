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
	setLabel := m("setLabel:", "v@:@", setLabel)
	label := m("label", "@@:", label)
	var err error
	reg := func(dst *objc.Class, name string, methods ...objc.Method) {
		if err != nil {
			return
		}
		*dst, err = objc.RegisterClass(name, nsObject, append(methods, dealloc))
	}
	reg(&classes.device, "PuremetalEmulatedDevice",
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
	)
	reg(&classes.buffer, "PuremetalEmulatedBuffer",
		m("contents", "^v@:", bufferContents),
		m("length", "Q@:", bufferLength),
		mi("didModifyRange:", "v@:{_NSRange=QQ}", support.didModifyRange),
		setLabel, label,
	)
	reg(&classes.library, "PuremetalEmulatedLibrary",
		m("newFunctionWithName:", "@@:@", libraryNewFunctionWithName),
		m("newFunctionWithName:constantValues:error:", "@@:@@^@", libraryNewFunctionWithNameConstantValuesError),
		m("functionNames", "@@:", libraryFunctionNames),
	)
	reg(&classes.function, "PuremetalEmulatedFunction",
		m("name", "@@:", functionName),
	)
	reg(&classes.pipeline, "PuremetalEmulatedComputePipelineState",
		m("maxTotalThreadsPerThreadgroup", "Q@:", pipelineMaxTotalThreadsPerThreadgroup),
		m("threadExecutionWidth", "Q@:", pipelineThreadExecutionWidth),
	)
	reg(&classes.queue, "PuremetalEmulatedCommandQueue",
		m("commandBuffer", "@@:", queueCommandBuffer),
	)
	reg(&classes.commandBuffer, "PuremetalEmulatedCommandBuffer",
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
	)
	reg(&classes.sharedEvent, "PuremetalEmulatedSharedEvent",
		m("signaledValue", "Q@:", sharedEventSignaledValue),
		m("setSignaledValue:", "v@:Q", sharedEventSetSignaledValue),
		m("notifyListener:atValue:block:", "v@:@Q@?", sharedEventNotifyListenerAtValueBlock),
		setLabel, label,
	)
	reg(&classes.binaryArchive, "PuremetalEmulatedBinaryArchive",
		m("addComputePipelineFunctionsWithDescriptor:error:", "c@:@^@", binaryArchiveAddComputePipelineFunctionsWithDescriptorError),
		m("serializeToURL:error:", "c@:@^@", binaryArchiveSerializeToURLError),
		setLabel, label,
	)
	// MTLBinaryArchiveDescriptor and MTLComputePipelineDescriptor are
	// classes, made with [[cls alloc] init].
	if objc.GetClass("MTLBinaryArchiveDescriptor") == 0 {
		reg(&classes.archiveDescriptor, "MTLBinaryArchiveDescriptor",
			m("init", "@@:", binaryArchiveDescriptorInit),
			m("setUrl:", "v@:@", binaryArchiveDescriptorSetURL),
			m("url", "@@:", binaryArchiveDescriptorURL),
		)
	}
	if objc.GetClass("MTLComputePipelineDescriptor") == 0 {
		reg(&classes.pipelineDescriptor, "MTLComputePipelineDescriptor",
			m("init", "@@:", computePipelineDescriptorInit),
			m("setComputeFunction:", "v@:@", computePipelineDescriptorSetComputeFunction),
			m("computeFunction", "@@:", computePipelineDescriptorComputeFunction),
			m("setBinaryArchives:", "v@:@", computePipelineDescriptorSetBinaryArchives),
			m("binaryArchives", "@@:", computePipelineDescriptorBinaryArchives),
		)
	}
	// MTLCaptureManager and MTLCaptureDescriptor are classes: the shared
	// manager comes from +sharedCaptureManager, a descriptor from
	// [[MTLCaptureDescriptor alloc] init].
	if objc.GetClass("MTLCaptureManager") == 0 {
		reg(&classes.captureManager, "MTLCaptureManager",
			m("supportsDestination:", "c@:q", captureManagerSupportsDestination),
			m("startCaptureWithDescriptor:error:", "c@:@^@", captureManagerStartCaptureWithDescriptorError),
			m("stopCapture", "v@:", captureManagerStopCapture),
			m("isCapturing", "c@:", captureManagerIsCapturing),
			m("newCaptureScopeWithCommandQueue:", "@@:@", captureManagerNewCaptureScopeWithCommandQueue),
		)
		if err == nil {
			err = objc.AddClassMethods(classes.captureManager, []objc.Method{
				m("sharedCaptureManager", "@@:", captureManagerSharedCaptureManager),
			})
		}
	}
	if objc.GetClass("MTLCaptureDescriptor") == 0 {
		reg(&classes.captureDescriptor, "MTLCaptureDescriptor",
			m("init", "@@:", captureDescriptorInit),
			m("setCaptureObject:", "v@:@", captureDescriptorSetCaptureObject),
			m("captureObject", "@@:", captureDescriptorCaptureObject),
			m("setDestination:", "v@:q", captureDescriptorSetDestination),
			m("destination", "q@:", captureDescriptorDestination),
			m("setOutputURL:", "v@:@", captureDescriptorSetOutputURL),
			m("outputURL", "@@:", captureDescriptorOutputURL),
		)
	}
	reg(&classes.captureScope, "PuremetalEmulatedCaptureScope",
		m("beginScope", "v@:", captureScopeBeginScope),
		m("endScope", "v@:", captureScopeEndScope),
		setLabel, label,
	)
	// MTLSharedEventListener is a class: mtl makes one with
	// [[MTLSharedEventListener alloc] init].
	if objc.GetClass("MTLSharedEventListener") == 0 {
		reg(&classes.listener, "MTLSharedEventListener",
			m("init", "@@:", listenerInit),
		)
	}
	reg(&classes.encoder, "PuremetalEmulatedComputeCommandEncoder",
		plain("setComputePipelineState:", "v@:@", encoderSetComputePipelineState),
		plain("setBuffer:offset:atIndex:", "v@:@QQ", encoderSetBufferOffsetAtIndex),
		mi("setBuffers:offsets:withRange:", "v@:^@^Q{_NSRange=QQ}", support.setBuffersOffsetsWithRange),
		plain("setBytes:length:atIndex:", "v@:^vQQ", encoderSetBytesLengthAtIndex),
		plain("setThreadgroupMemoryLength:atIndex:", "v@:QQ", encoderSetThreadgroupMemoryLengthAtIndex),
		mi("dispatchThreadgroups:threadsPerThreadgroup:", "v@:{MTLSize=QQQ}{MTLSize=QQQ}", support.dispatchThreadgroups),
		mi("dispatchThreads:threadsPerThreadgroup:", "v@:{MTLSize=QQQ}{MTLSize=QQQ}", support.dispatchThreads),
		plain("memoryBarrierWithScope:", "v@:Q", encoderMemoryBarrierWithScope),
		plain("endEncoding", "v@:", encoderEndEncoding),
	)
	reg(&classes.blitEncoder, "PuremetalEmulatedBlitCommandEncoder",
		plain("synchronizeResource:", "v@:@", blitEncoderSynchronizeResource),
		plain("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", "v@:@Q@QQ", blitEncoderCopyFromBufferSourceOffsetToBufferDestinationOffsetSize),
		plain("endEncoding", "v@:", blitEncoderEndEncoding),
	)
	// MTLCompileOptions is a class, not a protocol: mtl makes one with
	// [[MTLCompileOptions alloc] init]. Apple's systems have it; elsewhere
	// the emulated device provides it.
	if objc.GetClass("MTLCompileOptions") == 0 {
		reg(&classes.options, "MTLCompileOptions",
			m("init", "@@:", optionsInit),
			m("setLanguageVersion:", "v@:Q", optionsSetLanguageVersion),
			m("languageVersion", "Q@:", optionsLanguageVersion),
			m("setMathMode:", "v@:q", optionsSetMathMode),
			m("mathMode", "q@:", optionsMathMode),
			m("setFastMathEnabled:", "v@:c", optionsSetFastMathEnabled),
			m("fastMathEnabled", "c@:", optionsFastMathEnabled),
			m("setPreprocessorMacros:", "v@:@", optionsSetPreprocessorMacros),
			m("preprocessorMacros", "@@:", optionsPreprocessorMacros),
		)
	}
	// MTLFunctionConstantValues is a class too.
	if objc.GetClass("MTLFunctionConstantValues") == 0 {
		reg(&classes.constantValues, "MTLFunctionConstantValues",
			m("init", "@@:", constantValuesInit),
			m("setConstantValue:type:atIndex:", "v@:^vQQ", constantValuesSetConstantValueTypeAtIndex),
			m("setConstantValue:type:withName:", "v@:^vQ@", constantValuesSetConstantValueTypeWithName),
		)
	}
	return err
}
