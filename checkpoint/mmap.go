package checkpoint

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A MappedFile is a safetensors file mapped read-only into memory: its
// tensors' Data are byte ranges of the mapping, never copied into the Go
// heap, so a checkpoint of any size costs address space, not memory, and
// pages are read from disk on first touch. The mapping starts on a page
// boundary and covers the whole file, so a no-copy GPU buffer can be made
// over [MappedFile.Pages] and each tensor found in it at its Offset.
//
// The mapping is read-only: writing to a tensor's Data faults. Nothing
// read from the file may be used after [MappedFile.Close].
type MappedFile struct {
	*Safetensors
	Path string
	data []byte
}

// MapSafetensors maps the safetensors file at path and parses its header.
// A file that is too short for its header, or whose header lies about its
// tensors, is an error matching [ErrMalformed], naming the file.
func MapSafetensors(path string) (*MappedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	size := fi.Size()
	if size < 8 {
		return nil, fmt.Errorf("%w: %s has %d bytes, fewer than the 8 of the header length", ErrMalformed, path, size)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("checkpoint: %s: %d bytes do not fit the address space", path, size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: mmap %s: %w", path, err)
	}
	st, err := parseMapped(data)
	if err != nil {
		unix.Munmap(data)
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return &MappedFile{Safetensors: st, Path: path, data: data}, nil
}

// parseMapped parses a mapped file, checking the header length against the
// file before the parser reads it, and wraps a malformed file's error in
// [ErrMalformed].
func parseMapped(data []byte) (*Safetensors, error) {
	if n := binary.LittleEndian.Uint64(data); n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%w: header length %d bytes, but the file has %d bytes after the length: truncated", ErrMalformed, n, len(data)-8)
	}
	st, err := ParseSafetensors(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return st, nil
}

// Bytes returns the whole mapped file. It starts on a page boundary; a
// tensor's bytes are Bytes()[t.Offset : t.Offset+len(t.Data)].
func (f *MappedFile) Bytes() []byte { return f.data }

// Pages returns the mapping extended to a whole number of pages: what a
// no-copy GPU buffer is made over (Metal's newBufferWithBytesNoCopy wants
// a page-aligned address and length). The bytes past the end of the file,
// in its last page, read as zero.
func (f *MappedFile) Pages() []byte {
	page := os.Getpagesize()
	n := (len(f.data) + page - 1) / page * page
	return unsafe.Slice(&f.data[0], n)
}

// Close unmaps the file. Every Tensor's Data read from it becomes invalid.
// Closing twice is an error, not a fault.
func (f *MappedFile) Close() error {
	if f.data == nil {
		return fmt.Errorf("checkpoint: %s: closed twice", f.Path)
	}
	err := unix.Munmap(f.data)
	f.data = nil
	if err != nil {
		return fmt.Errorf("checkpoint: munmap %s: %w", f.Path, err)
	}
	return nil
}
