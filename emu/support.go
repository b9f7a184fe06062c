package emu

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
	"github.com/puremetal/puremetal/internal/clang"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

//go:embed csrc/imps.c
var supportSource string

// support holds the C method implementations of csrc/imps.c, compiled
// once per source version into the user cache directory (clang.LoadC) and
// loaded, each named after the method it implements.
var support struct {
	once sync.Once
	err  error

	gpuStartTime, gpuEndTime, maxThreadsPerThreadgroup objc.IMP
	dispatchThreadgroups, dispatchThreads              objc.IMP
	setBuffersOffsetsWithRange, didModifyRange         objc.IMP

	// The compute encoders' messages, recorded in C (see recording).
	setComputePipelineState, setBufferOffsetAtIndex objc.IMP
	setBytesLengthAtIndex, memoryBarrierWithScope   objc.IMP
	setThreadgroupMemoryLengthAtIndex               objc.IMP
	recordings                                      *[recordingSlots]recording
}

func loadSupport() error {
	support.once.Do(func() { support.err = buildSupport() })
	return support.err
}

func buildSupport() error {
	h, err := clang.LoadC(supportSource, "")
	if err != nil {
		return fmt.Errorf("emu: method shims: %w", err)
	}
	sym := func(name string) (uintptr, error) {
		p, err := purego.Dlsym(h, name)
		if err != nil {
			return 0, fmt.Errorf("emu: the method shims have no %s: %w", name, err)
		}
		return p, nil
	}
	for _, s := range []struct {
		name string    // the C function; its Go callback is the pointer name_go
		fn   any       // the callback
		dst  *objc.IMP // where the class registration finds the C function
	}{
		{"GPUStartTime", autoreleasing(commandBufferGPUStartTime), &support.gpuStartTime},
		{"GPUEndTime", autoreleasing(commandBufferGPUEndTime), &support.gpuEndTime},
		{"maxThreadsPerThreadgroup", autoreleasing(deviceMaxThreadsPerThreadgroup), &support.maxThreadsPerThreadgroup},
		{"dispatchThreadgroups_threadsPerThreadgroup", encoderDispatchThreadgroupsThreadsPerThreadgroup, &support.dispatchThreadgroups},
		{"dispatchThreads_threadsPerThreadgroup", encoderDispatchThreadsThreadsPerThreadgroup, &support.dispatchThreads},
		{"setBuffers_offsets_withRange", encoderSetBuffersOffsetsWithRange, &support.setBuffersOffsetsWithRange},
		{"setComputePipelineState", encoderSetComputePipelineState, &support.setComputePipelineState},
		{"setBuffer_offset_atIndex", encoderSetBufferOffsetAtIndex, &support.setBufferOffsetAtIndex},
		{"setBytes_length_atIndex", encoderSetBytesLengthAtIndex, &support.setBytesLengthAtIndex},
		{"setThreadgroupMemoryLength_atIndex", encoderSetThreadgroupMemoryLengthAtIndex, &support.setThreadgroupMemoryLengthAtIndex},
		{"memoryBarrierWithScope", encoderMemoryBarrierWithScope, &support.memoryBarrierWithScope},
		{"didModifyRange", autoreleasing(bufferDidModifyRange), &support.didModifyRange},
	} {
		imp, err := sym("puremetal_emu_" + s.name)
		if err != nil {
			return err
		}
		callback, err := sym("puremetal_emu_" + s.name + "_go")
		if err != nil {
			return err
		}
		*(*uintptr)(cptr(callback)) = purego.NewCallback(s.fn)
		*s.dst = objc.IMP(imp)
	}
	fselTable.Register()
	retain := fsel.retain // sent by the C methods, to what they record
	lookup, err := purego.Dlsym(purego.RTLD_DEFAULT, "objc_msg_lookup")
	if err != nil {
		return fmt.Errorf("emu: the Objective-C runtime has no objc_msg_lookup: %w", err)
	}
	for _, g := range []struct {
		name  string
		value uintptr
	}{
		{"msg_lookup", lookup},
		{"sel_retain", uintptr(retain)},
		{"max_bytes", mtl.MaxBytesLength},
		{"max_bindings", mtl.MaxBufferBindings},
	} {
		p, err := sym("puremetal_emu_" + g.name)
		if err != nil {
			return err
		}
		*(*uintptr)(cptr(p)) = g.value
	}
	p, err := sym("puremetal_emu_recordings")
	if err != nil {
		return err
	}
	support.recordings = (*[recordingSlots]recording)(cptr(p))
	return nil
}
