package mtl

import (
	"fmt"
	"path/filepath"

	"github.com/puremetal/puremetal/objc"
)

// BinaryArchive is an MTLBinaryArchive: compiled pipeline code that can be
// written to a file and loaded by a later process, so that making the same
// pipelines again skips the compiler. Metal's own shader cache may also
// spare a compile; an archive makes it certain, and portable between
// processes that share the file.
type BinaryArchive struct{ object }

// PipelineOption is MTLPipelineOption: how a pipeline is made.
type PipelineOption uint

// Pipeline options.
const (
	PipelineOptionNone PipelineOption = 0
	// PipelineOptionFailOnBinaryArchiveMiss makes the pipeline's creation
	// fail, instead of compiling, when none of the descriptor's binary
	// archives holds it.
	PipelineOptionFailOnBinaryArchiveMiss PipelineOption = 1 << 2
)

// fileURL returns an autoreleased file NSURL of path, made absolute; call
// it inside a pool.
func fileURL(path string) (objc.ID, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	s, err := objc.NewNSString(abs)
	if err != nil {
		return 0, err
	}
	defer s.Release()
	cls := objc.GetClass("NSURL")
	if cls == 0 {
		return 0, fmt.Errorf("the runtime has no NSURL class")
	}
	url := cls.Send(asel.fileURLWithPath, uintptr(s))
	if url == 0 {
		return 0, fmt.Errorf("fileURLWithPath: returned nil for %q", abs)
	}
	return url, nil
}

// newInstance returns [[cls alloc] init] of the class named class, owned
// by the caller, or an error where the runtime has no such class or init
// returns nil.
func newInstance(class string) (objc.ID, error) {
	cls := objc.GetClass(class)
	if cls == 0 {
		return 0, fmt.Errorf("mtl: the runtime has no %s class", class)
	}
	id := cls.New()
	if id == 0 {
		return 0, fmt.Errorf("mtl: [[%s alloc] init] returned nil", class)
	}
	return id, nil
}

// NewBinaryArchive makes a binary archive (newBinaryArchiveWithDescriptor:
// error:): an empty one when path is "", else the archive Metal reads from
// the file at path. A file that is not an archive Metal can read (cut
// short, altered, written by another kind of device) is an error holding
// Metal's reason.
func (d *Device) NewBinaryArchive(path string) (*BinaryArchive, error) {
	var a *BinaryArchive
	var err error
	inPool(func() {
		desc, nerr := newInstance("MTLBinaryArchiveDescriptor")
		if nerr != nil {
			err = nerr
			return
		}
		defer desc.Release()
		if path != "" {
			url, uerr := fileURL(path)
			if uerr != nil {
				err = fmt.Errorf("mtl: binary archive %s: %w", path, uerr)
				return
			}
			desc.Send(asel.setURL, uintptr(url))
		}
		nserr := new(objc.ID)
		id := d.ID().Send(asel.newBinaryArchiveWithDescriptorError, uintptr(desc), objc.Pointer(nserr))
		if id == 0 {
			err = fmt.Errorf("mtl: binary archive %q: %s", path, errorText(*nserr, "newBinaryArchiveWithDescriptor:error: returned nil"))
			return
		}
		a = &BinaryArchive{}
		a.set(id)
	})
	return a, err
}

// ComputePipelineDescriptor is an MTLComputePipelineDescriptor, as a Go
// value sent when a pipeline is made or added to an archive: the function,
// and the binary archives in which Metal looks for the pipeline's compiled
// code before it compiles it.
type ComputePipelineDescriptor struct {
	Function       *Function
	BinaryArchives []*BinaryArchive
}

// descriptor makes the MTLComputePipelineDescriptor of d, owned by the
// caller; call it inside a pool.
func (d ComputePipelineDescriptor) descriptor(what string) (objc.ID, error) {
	if d.Function == nil || d.Function.ID() == 0 {
		return 0, fmt.Errorf("mtl: %s: the descriptor has no function, or a released one", what)
	}
	desc, err := newInstance("MTLComputePipelineDescriptor")
	if err != nil {
		return 0, err
	}
	desc.Send(asel.setComputeFunction, uintptr(d.Function.ID()))
	if len(d.BinaryArchives) > 0 {
		ids := make([]objc.ID, len(d.BinaryArchives))
		for i, a := range d.BinaryArchives {
			if a == nil || a.ID() == 0 {
				desc.Release()
				return 0, fmt.Errorf("mtl: %s: binary archive %d is nil or released", what, i)
			}
			ids[i] = a.ID()
		}
		arr := objc.GetClass("NSArray").Send(asel.arrayWithObjectsCount, objc.Pointer(&ids[0]), uintptr(len(ids)))
		desc.Send(asel.setBinaryArchives, uintptr(arr))
	}
	return desc, nil
}

// AddComputePipelineFunctions compiles the descriptor's pipeline into the
// archive (addComputePipelineFunctionsWithDescriptor:error:).
func (a *BinaryArchive) AddComputePipelineFunctions(desc ComputePipelineDescriptor) error {
	var err error
	inPool(func() {
		d, derr := desc.descriptor("AddComputePipelineFunctions")
		if derr != nil {
			err = derr
			return
		}
		defer d.Release()
		nserr := new(objc.ID)
		if !objc.SendBool(a.ID(), asel.addComputePipelineFunctions, uintptr(d), objc.Pointer(nserr)) {
			err = fmt.Errorf("mtl: adding %q to the binary archive: %s", desc.Function.Name(), errorText(*nserr, "addComputePipelineFunctionsWithDescriptor:error: returned NO"))
		}
	})
	return err
}

// Serialize writes the archive to the file at path (serializeToURL:error:),
// which a later [Device.NewBinaryArchive] loads.
func (a *BinaryArchive) Serialize(path string) error {
	var err error
	inPool(func() {
		url, uerr := fileURL(path)
		if uerr != nil {
			err = fmt.Errorf("mtl: serializing the binary archive to %s: %w", path, uerr)
			return
		}
		nserr := new(objc.ID)
		if !objc.SendBool(a.ID(), asel.serializeToURLError, uintptr(url), objc.Pointer(nserr)) {
			err = fmt.Errorf("mtl: serializing the binary archive to %s: %s", path, errorText(*nserr, "serializeToURL:error: returned NO"))
		}
	})
	return err
}

// NewComputePipelineStateWithDescriptor makes a compute pipeline from a
// descriptor (newComputePipelineStateWithDescriptor:options:reflection:
// error:, without reflection): Metal takes its compiled code from the
// first of the descriptor's binary archives that holds it, and compiles
// it otherwise, unless opts has PipelineOptionFailOnBinaryArchiveMiss,
// which makes a miss an error.
func (d *Device) NewComputePipelineStateWithDescriptor(desc ComputePipelineDescriptor, opts PipelineOption) (*ComputePipelineState, error) {
	var p *ComputePipelineState
	var err error
	inPool(func() {
		dd, derr := desc.descriptor("NewComputePipelineStateWithDescriptor")
		if derr != nil {
			err = derr
			return
		}
		defer dd.Release()
		nserr := new(objc.ID)
		id := d.ID().Send(asel.newComputePipelineStateWithDesc, uintptr(dd), uintptr(opts), 0, objc.Pointer(nserr))
		if id == 0 {
			err = fmt.Errorf("mtl: compute pipeline for %q: %s", desc.Function.Name(), errorText(*nserr, "newComputePipelineStateWithDescriptor:options:reflection:error: returned nil"))
			return
		}
		p = &ComputePipelineState{
			maxTotal: int(id.SendWord(sel.maxTotalThreadsPerThreadgroup)),
			width:    int(id.SendWord(sel.threadExecutionWidth)),
		}
		p.set(id)
	})
	return p, err
}
