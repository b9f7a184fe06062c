package msl

// SIMDOp is a kind of SIMD-group function, as counted in Counters.SIMDOps.
type SIMDOp int

// The SIMD-group functions, in the runtime's numbering (__PM_OP_* in
// rt/include/pm_abi.h).
const (
	SIMDGroupBarrier SIMDOp = iota + 1
	SIMDSum
	SIMDProduct
	SIMDMin
	SIMDMax
	SIMDAnd
	SIMDOr
	SIMDXor
	SIMDPrefixInclusiveSum
	SIMDPrefixExclusiveSum
	SIMDPrefixInclusiveProduct
	SIMDPrefixExclusiveProduct
	SIMDShuffle
	SIMDShuffleXor
	SIMDShuffleUp
	SIMDShuffleDown
	SIMDShuffleRotateUp
	SIMDShuffleRotateDown
	SIMDBroadcast
	SIMDBroadcastFirst
	SIMDAll
	SIMDAny
	SIMDIsFirst
	SIMDBallot
	SIMDActiveThreadsMask
	SIMDGroupLoad               // simdgroup_load (simdgroup_matrix)
	SIMDGroupStore              // simdgroup_store
	SIMDGroupMultiply           // simdgroup_multiply
	SIMDGroupMultiplyAccumulate // simdgroup_multiply_accumulate
	SIMDShuffleAndFillUp
	SIMDShuffleAndFillDown
)

// NumSIMDOps is the length of Counters.SIMDOps; index 0 is unused.
const NumSIMDOps = int(SIMDShuffleAndFillDown) + 1

var simdOpNames = [NumSIMDOps]string{
	"", "simdgroup_barrier", "simd_sum", "simd_product", "simd_min", "simd_max",
	"simd_and", "simd_or", "simd_xor", "simd_prefix_inclusive_sum",
	"simd_prefix_exclusive_sum", "simd_prefix_inclusive_product",
	"simd_prefix_exclusive_product", "simd_shuffle", "simd_shuffle_xor",
	"simd_shuffle_up", "simd_shuffle_down", "simd_shuffle_rotate_up",
	"simd_shuffle_rotate_down", "simd_broadcast", "simd_broadcast_first",
	"simd_all", "simd_any", "simd_is_first", "simd_ballot", "simd_active_threads_mask",
	"simdgroup_load", "simdgroup_store", "simdgroup_multiply", "simdgroup_multiply_accumulate",
	"simd_shuffle_and_fill_up", "simd_shuffle_and_fill_down",
}

// String returns the function's MSL name.
func (op SIMDOp) String() string {
	if op > 0 && int(op) < NumSIMDOps {
		return simdOpNames[op]
	}
	return "SIMDOp(?)"
}

// ShuffleSteps is the number of dependent lane-exchange steps one call of
// op takes on a 32-lane SIMD-group: log2(32) = 5 for a reduction or prefix
// operation over all lanes (a butterfly of shuffles), 1 for a single
// shuffle, broadcast, vote or ballot, 0 for simdgroup_barrier,
// simd_is_first and the simdgroup_matrix functions (not lane exchanges of
// this kind).
func (op SIMDOp) ShuffleSteps() uint64 {
	switch {
	case op >= SIMDSum && op <= SIMDPrefixExclusiveProduct:
		return 5
	case op >= SIMDShuffle && op <= SIMDActiveThreadsMask && op != SIMDIsFirst,
		op == SIMDShuffleAndFillUp || op == SIMDShuffleAndFillDown:
		return 1
	}
	return 0
}

// ShuffleSteps adds up the lane-exchange steps of every SIMD-group
// function the dispatch called, once per SIMD-group (SIMDOp.ShuffleSteps).
func (c *Counters) ShuffleSteps() uint64 {
	var n uint64
	for op, calls := range c.SIMDOps {
		n += calls * SIMDOp(op).ShuffleSteps()
	}
	return n
}

// Segments describes the SIMD-group accesses through one buffer binding,
// loads or stores. A SIMD-group access is one memory instruction executed
// by the lanes of a SIMD-group together: the n-th execution of the
// instruction by each lane since the SIMD-group last synchronised (a
// SIMD-group function or a threadgroup barrier). A fully coalesced access
// touches as few segments as its bytes need.
type Segments struct {
	Accesses     uint64 // SIMD-group accesses
	LaneAccesses uint64 // the lanes' accesses they are made of
	Bytes        uint64 // bytes the lanes move
	// UniqueBytes adds up the distinct bytes each access touches: lanes
	// reading the same address (a broadcast) count once.
	UniqueBytes uint64
	// Touched32 and Touched128 add up the distinct 32- and 128-byte
	// aligned segments of device memory each access touches.
	Touched32, Touched128 uint64
	// Min32 and Min128 add up the fewest each access could touch:
	// ceil(unique bytes / 32) and ceil(unique bytes / 128).
	Min32, Min128 uint64
}

// Add returns the sum of s and t.
func (s Segments) Add(t Segments) Segments {
	return Segments{s.Accesses + t.Accesses, s.LaneAccesses + t.LaneAccesses, s.Bytes + t.Bytes, s.UniqueBytes + t.UniqueBytes,
		s.Touched32 + t.Touched32, s.Touched128 + t.Touched128, s.Min32 + t.Min32, s.Min128 + t.Min128}
}

// Ratio32 is Touched32 / Min32: 1 when every access is fully coalesced at
// 32-byte granularity, 0 without accesses. Ratio128 likewise.
func (s Segments) Ratio32() float64 { return ratio(s.Touched32, s.Min32) }

// Ratio128 is Touched128 / Min128; see Ratio32.
func (s Segments) Ratio128() float64 { return ratio(s.Touched128, s.Min128) }

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// structure fills the counters that describe the dispatch itself.
func (f *Function) structure(c *Counters, desc *pmDesc, d *Dispatch) {
	c.SIMDOps = desc.simdByOp
	for b := range desc.seg {
		c.Loads[b] = desc.seg[b][0]
		c.Stores[b] = desc.seg[b][1]
	}
	c.Untracked = desc.segUntracked
	for k := 0; k < 3; k++ {
		c.Threadgroups[k] = int(desc.threadgroups[k])
		c.ThreadsPerThreadgroup[k] = int(desc.threadsPerThreadgroup[k])
	}
	for _, n := range d.ThreadgroupMemoryLength {
		c.ThreadgroupMemory += n
	}
	c.ThreadgroupMemory += int(desc.tgStatic)
	c.PrivateBytes = f.PrivateBytes
}
