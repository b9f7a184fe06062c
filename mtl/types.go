package mtl

import (
	"math/big"
	"math/bits"
	"strconv"

	"github.com/puremetal/puremetal/objc"
)

// Size is MTLSize: the extent of a grid or a threadgroup, in threads or
// threadgroups, along three dimensions. The fields are ints, as lengths are
// everywhere else in Go; they are sent as MTLSize's three NSUIntegers, and
// the encoders refuse a dimension that is not positive.
type Size struct{ Width, Height, Depth int }

// Sz returns the Size of width × height × depth.
func Sz(width, height, depth int) Size { return Size{width, height, depth} }

// positive reports whether every dimension is at least 1.
func (s Size) positive() bool { return s.Width > 0 && s.Height > 0 && s.Depth > 0 }

// struct24 is s as the by-value MTLSize argument of a send: three
// NSUInteger words.
func (s Size) struct24() objc.Arg {
	return objc.Struct24(uintptr(s.Width), uintptr(s.Height), uintptr(s.Depth))
}

// threads returns Width*Height*Depth, and false if the product does not
// fit in 64 bits.
func (s Size) threads() (uint64, bool) {
	hi, wh := bits.Mul64(uint64(s.Width), uint64(s.Height))
	if hi != 0 {
		return 0, false
	}
	hi, n := bits.Mul64(wh, uint64(s.Depth))
	return n, hi == 0
}

// end returns start+n in decimal, exact even where the sum overflows an
// int: the end of a range, for error messages.
func end(start, n int) string {
	return new(big.Int).Add(big.NewInt(int64(start)), big.NewInt(int64(n))).String()
}

// threadsText is the product of s's dimensions in decimal, however large.
func (s Size) threadsText() string {
	n := new(big.Int).SetUint64(uint64(s.Width))
	n.Mul(n, new(big.Int).SetUint64(uint64(s.Height)))
	return n.Mul(n, new(big.Int).SetUint64(uint64(s.Depth))).String()
}

// ResourceOptions is MTLResourceOptions: a buffer's storage mode, CPU cache
// mode and hazard tracking, or-ed together.
type ResourceOptions uint

// Resource options.
const (
	ResourceCPUCacheModeDefaultCache    ResourceOptions = 0
	ResourceCPUCacheModeWriteCombined   ResourceOptions = 1
	ResourceStorageModeShared           ResourceOptions = 0
	ResourceStorageModeManaged          ResourceOptions = 16
	ResourceStorageModePrivate          ResourceOptions = 32
	ResourceStorageModeMemoryless       ResourceOptions = 48
	ResourceHazardTrackingModeUntracked ResourceOptions = 256
	ResourceHazardTrackingModeTracked   ResourceOptions = 512
)

// storageModeMask selects the storage-mode bits of ResourceOptions.
const storageModeMask ResourceOptions = 0xf0

// CommandBufferStatus is MTLCommandBufferStatus: where a command buffer is
// in its life.
type CommandBufferStatus uint

// Command buffer statuses.
const (
	CommandBufferStatusNotEnqueued CommandBufferStatus = 0
	CommandBufferStatusEnqueued    CommandBufferStatus = 1
	CommandBufferStatusCommitted   CommandBufferStatus = 2
	CommandBufferStatusScheduled   CommandBufferStatus = 3
	CommandBufferStatusCompleted   CommandBufferStatus = 4
	CommandBufferStatusError       CommandBufferStatus = 5
)

// String returns the status's name without the prefix.
func (s CommandBufferStatus) String() string {
	if s < CommandBufferStatus(len(commandBufferStatusNames)) {
		return commandBufferStatusNames[s]
	}
	return "CommandBufferStatus(" + strconv.FormatUint(uint64(s), 10) + ")"
}

var commandBufferStatusNames = [...]string{
	CommandBufferStatusNotEnqueued: "NotEnqueued",
	CommandBufferStatusEnqueued:    "Enqueued",
	CommandBufferStatusCommitted:   "Committed",
	CommandBufferStatusScheduled:   "Scheduled",
	CommandBufferStatusCompleted:   "Completed",
	CommandBufferStatusError:       "Error",
}

// BarrierScope is MTLBarrierScope: which resources a memory barrier orders.
type BarrierScope uint

// Barrier scopes.
const (
	BarrierScopeBuffers       BarrierScope = 1
	BarrierScopeTextures      BarrierScope = 2
	BarrierScopeRenderTargets BarrierScope = 4
)

// LanguageVersion is MTLLanguageVersion: the Metal Shading Language version
// a library is compiled as.
type LanguageVersion uint

// Language versions.
const (
	LanguageVersion3_0 LanguageVersion = 0x30000
	LanguageVersion3_1 LanguageVersion = 0x30001
	LanguageVersion3_2 LanguageVersion = 0x30002
	LanguageVersion4_0 LanguageVersion = 0x40000
)

// MathMode is MTLMathMode (macOS 15 and later): how much the compiler may
// relax floating-point semantics.
type MathMode uint

// Math modes.
const (
	MathModeSafe    MathMode = 0
	MathModeRelaxed MathMode = 1
	MathModeFast    MathMode = 2
)

// GPUFamily is MTLGPUFamily, for [Device.SupportsFamily].
type GPUFamily uint

// GPU families.
const (
	GPUFamilyApple7  GPUFamily = 1007
	GPUFamilyApple8  GPUFamily = 1008
	GPUFamilyApple9  GPUFamily = 1009
	GPUFamilyApple10 GPUFamily = 1010
	GPUFamilyMac2    GPUFamily = 2002
	GPUFamilyMetal3  GPUFamily = 5001
)

// DataType is MTLDataType: the type of a function constant value (and of
// arguments, in reflection). Only the scalar types are listed.
type DataType uint

// Data types.
const (
	DataTypeFloat  DataType = 3
	DataTypeHalf   DataType = 16
	DataTypeInt    DataType = 29
	DataTypeUInt   DataType = 33
	DataTypeShort  DataType = 37
	DataTypeUShort DataType = 41
	DataTypeChar   DataType = 45
	DataTypeUChar  DataType = 49
	DataTypeBool   DataType = 53
	DataTypeLong   DataType = 81
	DataTypeULong  DataType = 85
	DataTypeBFloat DataType = 121
)
