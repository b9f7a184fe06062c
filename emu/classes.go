package emu

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/ebitengine/purego"

	"github.com/puremetal/puremetal/objc"
)

// The Objective-C classes of the emulated device. Each answers the subset
// of one Metal protocol that package mtl sends, with Apple's selectors,
// argument types and ownership rules (new* results are owned by the caller;
// commandBuffer, computeCommandEncoder, name, label, functionNames and error
// results are autoreleased).
var classes struct {
	once sync.Once
	err  error

	device, buffer, library, function, pipeline objc.Class
	queue, commandBuffer, encoder, options      objc.Class
	blitEncoder, constantValues                 objc.Class
}

// Selectors the emulated objects send to Foundation objects and to
// compile options.
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
		m("hasUnifiedMemory", "c@:", yes),
		m("recommendedMaxWorkingSetSize", "Q@:", deviceWorkingSet),
		m("maxBufferLength", "Q@:", deviceMaxBufferLength),
		m("supportsFamily:", "c@:q", deviceSupportsFamily),
		m("newCommandQueue", "@@:", deviceNewCommandQueue),
		m("newBufferWithLength:options:", "@@:QQ", deviceNewBuffer),
		m("newBufferWithBytes:length:options:", "@@:^vQQ", deviceNewBufferWithBytes),
		m("newBufferWithBytesNoCopy:length:options:deallocator:", "@@:^vQQ@?", deviceNewBufferNoCopy),
		m("newLibraryWithSource:options:error:", "@@:@@^@", deviceNewLibrary),
		m("newComputePipelineStateWithFunction:error:", "@@:@^@", deviceNewPipeline),
	)
	reg(&classes.buffer, "PuremetalEmulatedBuffer",
		m("contents", "^v@:", bufferContents),
		m("length", "Q@:", bufferLength),
		mi("didModifyRange:", "v@:{_NSRange=QQ}", support.didModifyRange),
		setLabel, label,
	)
	reg(&classes.library, "PuremetalEmulatedLibrary",
		m("newFunctionWithName:", "@@:@", libraryNewFunction),
		m("newFunctionWithName:constantValues:error:", "@@:@@^@", libraryNewSpecializedFunction),
		m("functionNames", "@@:", libraryFunctionNames),
	)
	reg(&classes.function, "PuremetalEmulatedFunction",
		m("name", "@@:", functionName),
	)
	reg(&classes.pipeline, "PuremetalEmulatedComputePipelineState",
		m("maxTotalThreadsPerThreadgroup", "Q@:", pipelineMaxTotal),
		m("threadExecutionWidth", "Q@:", pipelineWidth),
	)
	reg(&classes.queue, "PuremetalEmulatedCommandQueue",
		m("commandBuffer", "@@:", queueCommandBuffer),
	)
	reg(&classes.commandBuffer, "PuremetalEmulatedCommandBuffer",
		m("computeCommandEncoder", "@@:", commandBufferEncoder),
		m("blitCommandEncoder", "@@:", commandBufferBlitCommandEncoder),
		m("commit", "v@:", commandBufferCommit),
		m("waitUntilCompleted", "v@:", commandBufferWait),
		m("status", "Q@:", commandBufferStatus),
		m("error", "@@:", commandBufferError),
		mi("GPUStartTime", "d@:", support.gpuStartTime),
		mi("GPUEndTime", "d@:", support.gpuEndTime),
		setLabel, label,
	)
	reg(&classes.encoder, "PuremetalEmulatedComputeCommandEncoder",
		plain("setComputePipelineState:", "v@:@", encoderSetPipeline),
		plain("setBuffer:offset:atIndex:", "v@:@QQ", encoderSetBuffer),
		mi("setBuffers:offsets:withRange:", "v@:^@^Q{_NSRange=QQ}", support.setBuffersOffsetsWithRange),
		plain("setBytes:length:atIndex:", "v@:^vQQ", encoderSetBytes),
		plain("setThreadgroupMemoryLength:atIndex:", "v@:QQ", encoderSetThreadgroupMemoryLength),
		mi("dispatchThreadgroups:threadsPerThreadgroup:", "v@:{MTLSize=QQQ}{MTLSize=QQQ}", support.dispatchThreadgroups),
		mi("dispatchThreads:threadsPerThreadgroup:", "v@:{MTLSize=QQQ}{MTLSize=QQQ}", support.dispatchThreads),
		plain("memoryBarrierWithScope:", "v@:Q", encoderMemoryBarrier),
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
			m("setFastMathEnabled:", "v@:c", optionsSetFastMath),
			m("fastMathEnabled", "c@:", optionsFastMath),
			m("setPreprocessorMacros:", "v@:@", optionsSetPreprocessorMacros),
			m("preprocessorMacros", "@@:", optionsPreprocessorMacros),
		)
	}
	if objc.GetClass("MTLFunctionConstantValues") == 0 {
		reg(&classes.constantValues, "MTLFunctionConstantValues",
			m("init", "@@:", constantValuesInit),
			m("setConstantValue:type:atIndex:", "v@:^vQQ", constantValuesSetAtIndex),
			m("setConstantValue:type:withName:", "v@:^vQ@", constantValuesSetWithName),
		)
	}
	return err
}

func yes(objc.ID, objc.SEL) uintptr { return 1 }

func boolWord(b bool) uintptr {
	if b {
		return 1
	}
	return 0
}

// labeled is state with a label.
type labeled struct{ label string }

func (l *labeled) labelPtr() *labeled { return l }

type hasLabel interface{ labelPtr() *labeled }

func labelOf(self objc.ID) *labeled {
	objects.RLock()
	s := objects.m[self]
	objects.RUnlock()
	if h, ok := s.(hasLabel); ok {
		return h.labelPtr()
	}
	return nil
}

func setLabel(self objc.ID, _ objc.SEL, str objc.ID) {
	if l := labelOf(self); l != nil {
		l.label = objc.GoString(str)
	}
}

func label(self objc.ID, _ objc.SEL) objc.ID {
	l := labelOf(self)
	if l == nil || l.label == "" {
		return 0
	}
	return autoreleasedString(l.label)
}

// autoreleasedString returns an autoreleased NSString, as getters do.
func autoreleasedString(s string) objc.ID {
	str, err := objc.NewNSString(s)
	if err != nil {
		return 0
	}
	return str.Autorelease()
}

// newNSError returns an autoreleased NSError with the given domain, code
// and localized description.
func newNSError(domain string, code int, description string) objc.ID {
	d, _ := objc.NewNSString(domain)
	desc, _ := objc.NewNSString(description)
	key := localizedDescriptionKey()
	info := objc.GetClass("NSDictionary").Send(fsel.dictionaryWithObjectForKey, uintptr(desc), uintptr(key))
	e := objc.GetClass("NSError").Send(fsel.alloc).Send(fsel.initWithDomainCodeUserInfo, uintptr(d), uintptr(code), uintptr(info))
	d.Release()
	desc.Release()
	return e.Autorelease()
}

// localizedDescriptionKey returns Foundation's NSLocalizedDescriptionKey
// constant, whose value differs between Apple's Foundation and GNUstep.
func localizedDescriptionKey() objc.ID {
	keyOnce.Do(func() {
		for _, lib := range []string{"libgnustep-base.so.1.28", "/System/Library/Frameworks/Foundation.framework/Foundation"} {
			h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				continue
			}
			if p, err := purego.Dlsym(h, "NSLocalizedDescriptionKey"); err == nil && p != 0 {
				key = *(*objc.ID)(cptr(p))
				return
			}
		}
	})
	return key
}

var (
	keyOnce sync.Once
	key     objc.ID
)

// storeOut writes an object to an NSError** out-parameter, if given.
func storeOut(out uintptr, obj objc.ID) {
	if out != 0 {
		*(*objc.ID)(cptr(out)) = obj
	}
}
