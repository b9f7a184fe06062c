package mtl

import "github.com/puremetal/puremetal/objc"

// asel holds the selectors of completion handlers, shared events, binary
// archives and GPU capture, registered with sel (loadSels), each with the
// type encoding of Apple's method. TestSelectorsAreApples checks them as
// it checks sel.
var asel struct {
	// MTLCommandBuffer
	addCompletedHandler    objc.SEL `sel:"addCompletedHandler:" types:"v@:@?"`
	addScheduledHandler    objc.SEL `sel:"addScheduledHandler:" types:"v@:@?"`
	encodeSignalEventValue objc.SEL `sel:"encodeSignalEvent:value:" types:"v@:@Q"`
	encodeWaitForEventVal  objc.SEL `sel:"encodeWaitForEvent:value:" types:"v@:@Q"`

	// MTLDevice, MTLSharedEvent
	newSharedEvent             objc.SEL `sel:"newSharedEvent" types:"@@:"`
	signaledValue              objc.SEL `sel:"signaledValue" types:"Q@:"`
	setSignaledValue           objc.SEL `sel:"setSignaledValue:" types:"v@:Q"`
	notifyListenerAtValueBlock objc.SEL `sel:"notifyListener:atValue:block:" types:"v@:@Q@?"`

	// MTLBinaryArchive and its descriptor, MTLComputePipelineDescriptor,
	// NSURL, NSArray
	newBinaryArchiveWithDescriptorError objc.SEL `sel:"newBinaryArchiveWithDescriptor:error:" types:"@@:@^@"`
	setURL                              objc.SEL `sel:"setUrl:" types:"v@:@"`
	addComputePipelineFunctions         objc.SEL `sel:"addComputePipelineFunctionsWithDescriptor:error:" types:"c@:@^@"`
	serializeToURLError                 objc.SEL `sel:"serializeToURL:error:" types:"c@:@^@"`
	setComputeFunction                  objc.SEL `sel:"setComputeFunction:" types:"v@:@"`
	setBinaryArchives                   objc.SEL `sel:"setBinaryArchives:" types:"v@:@"`
	newComputePipelineStateWithDesc     objc.SEL `sel:"newComputePipelineStateWithDescriptor:options:reflection:error:" types:"@@:@Q^@^@"`
	fileURLWithPath                     objc.SEL `sel:"fileURLWithPath:" types:"@@:@"`
	arrayWithObjectsCount               objc.SEL `sel:"arrayWithObjects:count:" types:"@@:^@Q"`

	// MTLCaptureManager, MTLCaptureDescriptor, MTLCaptureScope
	sharedCaptureManager            objc.SEL `sel:"sharedCaptureManager" types:"@@:"`
	supportsDestination             objc.SEL `sel:"supportsDestination:" types:"c@:q"`
	startCaptureWithDescriptorError objc.SEL `sel:"startCaptureWithDescriptor:error:" types:"c@:@^@"`
	stopCapture                     objc.SEL `sel:"stopCapture" types:"v@:"`
	isCapturing                     objc.SEL `sel:"isCapturing" types:"c@:"`
	setCaptureObject                objc.SEL `sel:"setCaptureObject:" types:"v@:@"`
	setDestination                  objc.SEL `sel:"setDestination:" types:"v@:q"`
	setOutputURL                    objc.SEL `sel:"setOutputURL:" types:"v@:@"`
	newCaptureScopeWithCommandQueue objc.SEL `sel:"newCaptureScopeWithCommandQueue:" types:"@@:@"`
	beginScope                      objc.SEL `sel:"beginScope" types:"v@:"`
	endScope                        objc.SEL `sel:"endScope" types:"v@:"`
}

var aselTable = objc.NewSelectorTable(&asel)
