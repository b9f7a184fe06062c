package emu

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/puremetal/puremetal/emu/msl"
	"github.com/puremetal/puremetal/objc"
)

// A binary archive of the emulated device holds what Metal's holds, the
// compiled code of compute pipelines: for each pipeline function added,
// its name and the shared object package msl built for its library, under
// the name msl's cache gives it (the hash of the source, options, runtime,
// compiler and target). Loading an archive (newBinaryArchiveWithDescriptor:
// error: with a URL) puts its shared objects into the device's compile
// cache, so that making the same library again loads it instead of
// running clang: the emulated device builds a library's machine code when
// the library is made, where a GPU's compiler finishes it when the
// pipeline is made, so that is where the archive saves the compile. A
// pipeline made from a descriptor whose binaryArchives hold its function
// is an archive hit; with MTLPipelineOptionFailOnBinaryArchiveMiss, a miss
// is an error, as on Metal.
//
// The file is a header line and JSON: readable, and checked when loaded (a
// file that is not an archive, was cut short or altered, or was written for
// another target or device is refused with
// MTLBinaryArchiveErrorInvalidFile, naming why).
type binaryArchive struct {
	labeled
	mu        sync.Mutex
	libraries map[string][]byte // by msl's file name
	functions map[archivedFunction]bool
}

// archivedFunction names one pipeline function of an archive.
type archivedFunction struct{ Name, Library string }

// archiveMagic is the first line of an emulated binary archive file.
const archiveMagic = "puremetal emulated binary archive 1\n"

type archiveFile struct {
	Target, Device string
	Libraries      []archiveLibrary
	Functions      []archivedFunction
}

type archiveLibrary struct {
	Name, SHA256 string
	Bytes        []byte
}

// The codes of MTLBinaryArchiveErrorDomain.
const (
	binaryArchiveErrorInvalidFile        = 1
	binaryArchiveErrorCompilationFailure = 3
	binaryArchiveErrorInternalError      = 4
)

const binaryArchiveDomain = "MTLBinaryArchiveDomain"

// pipelineOptionFailOnBinaryArchiveMiss is
// MTLPipelineOptionFailOnBinaryArchiveMiss.
const pipelineOptionFailOnBinaryArchiveMiss = 1 << 2

// libraryBuilds counts the libraries the emulated device built with clang.
var libraryBuilds atomic.Int64

// LibraryBuilds returns how many libraries the emulated devices of the
// process have built with clang++, not found in their compile cache: what
// a binary archive, once loaded, saves.
func LibraryBuilds() int { return int(libraryBuilds.Load()) }

// urlPath returns the file path of an NSURL (fileSystemRepresentation,
// or path where the NSURL has no fileSystemRepresentation, as GNUstep's
// has not), or "" for nil.
func urlPath(url objc.ID) string {
	if url == 0 {
		return ""
	}
	if !url.RespondsToSelector(fsel.fileSystemRepresentation) {
		return objc.GoString(url.Send(fsel.path))
	}
	p := objc.SendWord(url, fsel.fileSystemRepresentation)
	if p == 0 {
		return ""
	}
	var b []byte
	for i := uintptr(0); ; i++ {
		c := *(*byte)(unsafe.Add(cptr(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

func deviceNewBinaryArchiveWithDescriptorError(self objc.ID, _ objc.SEL, desc objc.ID, errOut uintptr) objc.ID {
	if stateOf[device](self) == nil {
		return 0
	}
	a := &binaryArchive{libraries: map[string][]byte{}, functions: map[archivedFunction]bool{}}
	if desc != 0 {
		if path := urlPath(desc.Send(fsel.url)); path != "" {
			if err := a.load(path); err != nil {
				storeOut(errOut, newNSError(binaryArchiveDomain, binaryArchiveErrorInvalidFile, err.Error()))
				return 0
			}
		}
	}
	return newObject(classes.binaryArchive, a)
}

// load reads an archive file, checks it, and installs its libraries in the
// compile cache.
func (a *binaryArchive) load(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	body, ok := bytes.CutPrefix(b, []byte(archiveMagic))
	if !ok {
		return fmt.Errorf("not an emulated device's binary archive (its first %d bytes are not %q)", len(archiveMagic), archiveMagic[:len(archiveMagic)-1])
	}
	var f archiveFile
	if err := json.Unmarshal(body, &f); err != nil {
		return fmt.Errorf("cut short or altered: %v", err)
	}
	if target := runtime.GOOS + "/" + runtime.GOARCH; f.Target != target || f.Device != Name {
		return fmt.Errorf("written for %q on %s, this is %q on %s", f.Device, f.Target, Name, target)
	}
	for _, l := range f.Libraries {
		if sum := sha256.Sum256(l.Bytes); hex.EncodeToString(sum[:]) != l.SHA256 {
			return fmt.Errorf("library %s does not match its checksum", l.Name)
		}
	}
	libs := map[string][]byte{}
	for _, l := range f.Libraries {
		libs[l.Name] = l.Bytes
	}
	for _, fn := range f.Functions {
		if libs[fn.Library] == nil {
			return fmt.Errorf("function %s names library %s, which the archive does not hold", fn.Name, fn.Library)
		}
	}
	for name, so := range libs {
		if err := msl.InstallLibrary(name, so, ""); err != nil {
			return err
		}
	}
	a.libraries = libs
	for _, fn := range f.Functions {
		a.functions[fn] = true
	}
	return nil
}

// pipelineFunction returns the emulated function of a compute pipeline
// descriptor (computeFunction), read through its selectors, or an error.
func pipelineFunction(desc objc.ID) (*function, error) {
	if desc == 0 {
		return nil, errors.New("no descriptor")
	}
	f := stateOf[function](desc.Send(fsel.computeFunction))
	if f == nil {
		return nil, errors.New("the descriptor's computeFunction is nil or not one of the emulated device's functions")
	}
	if need := unspecialized(f.fn); need != nil {
		return nil, fmt.Errorf("function %s uses function constants without values", f.fn.Name)
	}
	return f, nil
}

func archivedFunctionOf(f *function) archivedFunction {
	return archivedFunction{f.fn.Name, filepath.Base(f.fn.LibraryPath())}
}

func binaryArchiveAddComputePipelineFunctionsWithDescriptorError(self objc.ID, _ objc.SEL, desc objc.ID, errOut uintptr) uintptr {
	a := stateOf[binaryArchive](self)
	if a == nil {
		return 0
	}
	f, err := pipelineFunction(desc)
	if err != nil {
		storeOut(errOut, newNSError(binaryArchiveDomain, binaryArchiveErrorCompilationFailure, "addComputePipelineFunctionsWithDescriptor:error: "+err.Error()))
		return 0
	}
	key := archivedFunctionOf(f)
	a.mu.Lock()
	defer a.mu.Unlock()
	// the whole library the function belongs to, every part of it, so
	// that compiling its source finds it all built
	for _, path := range f.fn.LibraryPaths() {
		name := filepath.Base(path)
		if a.libraries[name] != nil {
			continue
		}
		so, err := os.ReadFile(path)
		if err != nil {
			storeOut(errOut, newNSError(binaryArchiveDomain, binaryArchiveErrorInternalError, "addComputePipelineFunctionsWithDescriptor:error: "+err.Error()))
			return 0
		}
		a.libraries[name] = so
	}
	a.functions[key] = true
	return 1
}

func binaryArchiveSerializeToURLError(self objc.ID, _ objc.SEL, url objc.ID, errOut uintptr) uintptr {
	a := stateOf[binaryArchive](self)
	if a == nil {
		return 0
	}
	fail := func(err error) uintptr {
		storeOut(errOut, newNSError(binaryArchiveDomain, binaryArchiveErrorInternalError, "serializeToURL:error: "+err.Error()))
		return 0
	}
	path := urlPath(url)
	if path == "" {
		return fail(errors.New("no file URL"))
	}
	a.mu.Lock()
	f := archiveFile{Target: runtime.GOOS + "/" + runtime.GOARCH, Device: Name}
	for name, so := range a.libraries {
		sum := sha256.Sum256(so)
		f.Libraries = append(f.Libraries, archiveLibrary{Name: name, SHA256: hex.EncodeToString(sum[:]), Bytes: so})
	}
	for fn := range a.functions {
		f.Functions = append(f.Functions, fn)
	}
	a.mu.Unlock()
	body, err := json.Marshal(f)
	if err != nil {
		return fail(err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".archive-*")
	if err != nil {
		return fail(err)
	}
	_, err = tmp.Write(append([]byte(archiveMagic), body...))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fail(err)
	}
	return 1
}

// contains reports whether the archive holds the function's pipeline.
func (a *binaryArchive) contains(key archivedFunction) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.functions[key]
}

func deviceNewComputePipelineStateWithDescriptorOptionsReflectionError(self objc.ID, _ objc.SEL, desc objc.ID, options, reflection, errOut uintptr) objc.ID {
	f, err := pipelineFunction(desc)
	if err == nil {
		err = otherDevice("function", desc.Send(fsel.computeFunction), f.dev, stateOf[device](self))
	}
	if err != nil {
		storeOut(errOut, newNSError("CompilerError", 1, "newComputePipelineStateWithDescriptor:options:reflection:error: "+err.Error()))
		return 0
	}
	hit := false
	if archives := desc.Send(fsel.binaryArchives); archives != 0 {
		key := archivedFunctionOf(f)
		for i := range int(objc.SendWord(archives, fsel.count)) {
			if a := stateOf[binaryArchive](objc.Send(archives, fsel.objectAtIndex, uintptr(i))); a != nil && a.contains(key) {
				hit = true
				break
			}
		}
	}
	if !hit && options&pipelineOptionFailOnBinaryArchiveMiss != 0 {
		storeOut(errOut, newNSError(binaryArchiveDomain, binaryArchiveErrorCompilationFailure,
			fmt.Sprintf("newComputePipelineStateWithDescriptor:options:reflection:error: function %s is in none of the descriptor's binary archives (MTLPipelineOptionFailOnBinaryArchiveMiss)", f.fn.Name)))
		return 0
	}
	storeOut(reflection, 0)
	return newObject(classes.pipeline, &pipeline{fn: f.fn, dev: f.dev})
}

// computePipelineDescriptor is the state of the emulated
// MTLComputePipelineDescriptor: its function and archives, retained.
type computePipelineDescriptor struct {
	function, archives objc.ID
}

func (d *computePipelineDescriptor) free() {
	d.function.Release()
	d.archives.Release()
}

var computePipelineDescriptorInit = initState(func() *computePipelineDescriptor { return &computePipelineDescriptor{} })

var computePipelineDescriptorComputeFunction, computePipelineDescriptorSetComputeFunction = objectProperty(func(d *computePipelineDescriptor) *objc.ID { return &d.function })

var computePipelineDescriptorBinaryArchives, computePipelineDescriptorSetBinaryArchives = objectProperty(func(d *computePipelineDescriptor) *objc.ID { return &d.archives })

// binaryArchiveDescriptor is the state of the emulated
// MTLBinaryArchiveDescriptor: its URL, retained.
type binaryArchiveDescriptor struct{ url objc.ID }

func (d *binaryArchiveDescriptor) free() { d.url.Release() }

var binaryArchiveDescriptorInit = initState(func() *binaryArchiveDescriptor { return &binaryArchiveDescriptor{} })

var binaryArchiveDescriptorURL, binaryArchiveDescriptorSetURL = objectProperty(func(d *binaryArchiveDescriptor) *objc.ID { return &d.url })
