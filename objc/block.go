package objc

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// A Block is a pointer to an Objective-C block: a function with the data it
// captured, as Apple's APIs take for callbacks (such as the deallocator of
// newBufferWithBytesNoCopy:length:options:deallocator:). A block's first
// words are its class (isa), flags, a reserved word, the function that runs
// it (invoke), which takes the block itself first and then the block's
// arguments, and a descriptor holding the block's size. Apple's runtime and
// GNUstep lay blocks out, copy and release them alike.
type Block uintptr

// blockLiteral is the layout of a block that captures nothing.
type blockLiteral struct {
	isa        uintptr
	flags      int32
	_          int32 // reserved
	invoke     uintptr
	descriptor *blockDescriptor
}

// blockDescriptor describes a blockLiteral: its reserved word and size.
type blockDescriptor struct {
	_    uintptr // reserved
	size uintptr
}

// descriptor is shared by every block NewBlock makes; the runtime's heap
// copies point to it for the life of the process.
var descriptor = &blockDescriptor{size: unsafe.Sizeof(blockLiteral{})}

// literals keeps every block literal NewBlock made for the life of the
// process. _Block_copy need not copy a stack block: GNUstep's returns the
// literal itself unless the flags carry its descriptor bit, so the block a
// caller holds may be the literal, which only C then refers to and Go's
// collector would otherwise free.
var literals struct {
	mu   sync.Mutex
	list []*blockLiteral
}

var blocks struct {
	once                    sync.Once
	err                     error
	stackBlock, copy, relse uintptr
}

func loadBlocks() error {
	blocks.once.Do(func() {
		if blocks.err = Load(); blocks.err != nil {
			return
		}
		// Apple's libSystem and GNUstep Base (loaded by Load, with its
		// symbols global) export the blocks runtime.
		blocks.err = resolve(purego.RTLD_DEFAULT, "the process (libSystem, GNUstep Base)", []symbol{
			{"_NSConcreteStackBlock", &blocks.stackBlock},
			{"_Block_copy", &blocks.copy},
			{"_Block_release", &blocks.relse},
		})
	})
	return blocks.err
}

// NewBlock returns a block, owned by the caller, that captures nothing and
// runs invoke: a C function pointer (such as one made with
// purego.NewCallback) whose first parameter is the block. It is a stack
// block literal copied with _Block_copy, so that a method that keeps the
// block (copies it again) may do so; the literal itself is kept for the life
// of the process, like the callback it runs. Release the block with
// [Block.Release].
func NewBlock(invoke uintptr) (Block, error) {
	if err := loadBlocks(); err != nil {
		return 0, err
	}
	lit := &blockLiteral{isa: blocks.stackBlock, invoke: invoke, descriptor: descriptor}
	literals.mu.Lock()
	literals.list = append(literals.list, lit)
	literals.mu.Unlock()
	r, _, _ := purego.SyscallN(blocks.copy, uintptr(unsafe.Pointer(lit)))
	runtime.KeepAlive(lit)
	if r == 0 {
		return 0, fmt.Errorf("objc: _Block_copy returned NULL")
	}
	return Block(r), nil
}

// Copy returns the block copied for keeping (_Block_copy): a heap block's
// reference count is incremented. The caller releases the copy.
func (b Block) Copy() Block {
	if b == 0 || loadBlocks() != nil {
		return 0
	}
	r, _, _ := purego.SyscallN(blocks.copy, uintptr(b))
	return Block(r)
}

// Release releases a copy of the block (_Block_release).
func (b Block) Release() {
	if b == 0 || loadBlocks() != nil {
		return
	}
	purego.SyscallN(blocks.relse, uintptr(b))
}

// Invoke runs the block with the given arguments: its invoke function,
// given the block first.
func (b Block) Invoke(args ...uintptr) {
	if b == 0 {
		return
	}
	lit := (*blockLiteral)(cptr(uintptr(b)))
	purego.SyscallN(lit.invoke, append([]uintptr{uintptr(b)}, args...)...)
}
