package msl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A hostile kernel of FuzzHostileKernel: up to 10 operations run by one
// threadgroup of hostileThreads threads, each indexing device, constant or
// threadgroup memory at an offset read from a buffer (so that kernels of
// one structure share a compiled library), or a threadgroup barrier.
const (
	hostileThreads = 64
	hostileTG      = 64  // floats of threadgroup(0), t
	hostileStatic  = 32  // floats of the threadgroup array s declared in the kernel
	hostileDevice  = 128 // floats of buffer(0), d
	hostileConst   = 64  // floats of buffer(1), c
	hostileMaxOps  = 10
)

type hostileKind int

const (
	tgStoreOne     hostileKind = iota // if (tid == g) t[o] = acc
	tgLoadOne                         // if (tid == g) acc += t[o]
	tgStoreAll                        // t[tid + o] = acc
	tgLoadAll                         // acc += t[tid + o]
	barrier                           // threadgroup_barrier(mem_flags::mem_threadgroup)
	deviceStoreOne                    // if (tid == g) d[o] = acc
	deviceLoadAll                     // acc += d[tid + o]
	constLoadOne                      // if (tid == g) acc += c[o]
	staticStoreOne                    // if (tid == g) s[o] = acc
	staticLoadAll                     // acc += s[tid + o]
	hostileKinds
)

// hostileStatements are the kinds' statements but barrier's, of the
// guarded thread (%[1]d) and the offset (%[2]s).
var hostileStatements = map[hostileKind]string{
	tgStoreOne:     "    if (i == %[1]d) t[%[2]s] = acc;\n",
	tgLoadOne:      "    if (i == %[1]d) acc += t[%[2]s];\n",
	tgStoreAll:     "    t[i + %[2]s] = acc;\n",
	tgLoadAll:      "    acc += t[i + %[2]s];\n",
	deviceStoreOne: "    if (i == %[1]d) d[%[2]s] = acc;\n",
	deviceLoadAll:  "    acc += d[i + %[2]s];\n",
	constLoadOne:   "    if (i == %[1]d) acc += c[%[2]s];\n",
	staticStoreOne: "    if (i == %[1]d) s[%[2]s] = acc;\n",
	staticLoadAll:  "    acc += s[i + %[2]s];\n",
}

type hostileOp struct {
	kind   hostileKind
	thread int // the thread of a guarded operation
	offset int32
}

// hostileKernel decodes fuzz input: a count, then a kind and a thread per
// operation, then the offsets (int32, little-endian), bounded so that a
// stray access stays within reach of the memory it was made for (a
// threadgroup pointer within 4 MiB of threadgroup memory, a device or
// constant one within 32 KiB of its buffer).
func hostileKernel(data []byte) []hostileOp {
	if len(data) == 0 {
		data = []byte{0}
	}
	n := 1 + int(data[0])%hostileMaxOps
	ops := make([]hostileOp, n)
	at := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	for i := range ops {
		ops[i].kind = hostileKind(int(at(1+2*i)) % int(hostileKinds))
		ops[i].thread = int(at(2+2*i)) % hostileThreads
		var b [4]byte
		for j := range b {
			b[j] = at(1 + 2*n + 4*i + j)
		}
		o := int32(binary.LittleEndian.Uint32(b[:]))
		switch ops[i].kind {
		case tgStoreOne, tgLoadOne, tgStoreAll, tgLoadAll:
			o %= 1 << 20
		case deviceStoreOne, deviceLoadAll, constLoadOne:
			o %= 8192
		case staticStoreOne, staticLoadAll:
			o %= 2 * hostileStatic
		}
		ops[i].offset = o
	}
	return ops
}

// source is the kernel of the operations; operation i reads its offset
// from p[i].
func hostileSource(ops []hostileOp) string {
	var b strings.Builder
	b.WriteString(mslPrelude + `kernel void hostile(device float* d [[buffer(0)]],
                    constant float* c [[buffer(1)]],
                    constant int* p [[buffer(2)]],
                    threadgroup float* t [[threadgroup(0)]],
                    uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float s[32];
    float acc = 0.5f;
    int i = int(tid);
`)
	for k, op := range ops {
		if op.kind == barrier {
			b.WriteString("    threadgroup_barrier(mem_flags::mem_threadgroup);\n")
			continue
		}
		fmt.Fprintf(&b, hostileStatements[op.kind], op.thread, fmt.Sprintf("p[%d]", k))
	}
	b.WriteString("    d[i] = acc;\n}\n")
	return b.String()
}

// hostileExpect models the kernel: whether an access in each barrier phase
// is refused, and whether two threads race on threadgroup memory (the
// same bytes, one storing, no barrier between). Threadgroup memory holds t
// at offset 0 and s after it; an access through t is refused only outside
// both (the emulator checks pointers against every allocation), one
// indexing s outside its 32 elements always. A device or constant access
// is refused outside every bound buffer, but for loads of the library's
// constants (inLib). The kernels run with Dispatch.DeviceRaces: two
// threads accessing a float of d, one storing, race whatever barriers lie
// between (they give mem_threadgroup alone, which orders no device
// memory), unless the load comes in an earlier phase than the store (an
// execution barrier orders the loads before it before the stores after
// it); the kernel's last line stores d[tid]. Stray device accesses landing
// in c or p (constant buffers) are not recorded.
func hostileExpect(ops []hostileOp, bound func(addr uint64, store bool) bool, dBase, cBase uint64) (oobPhase, racePhase int) {
	oobPhase, racePhase = -1, -1
	type access struct {
		thread, phase int
		store         bool
	}
	phase := 0
	seen := map[int64][]access{} // tg byte offset of a float -> accesses this phase
	tgTotal := int64(4*hostileTG + 4*hostileStatic)
	note := func(off int64, thread int, store bool) {
		if off < 0 || off+4 > tgTotal {
			if oobPhase < 0 {
				oobPhase = phase
			}
			return
		}
		for _, a := range seen[off] {
			if a.thread != thread && (a.store || store) && racePhase < 0 {
				racePhase = phase
			}
		}
		seen[off] = append(seen[off], access{thread, phase, store})
	}
	devSeen := map[int64][]access{} // float index of d -> every access
	devNote := func(e int64, thread int, store bool) {
		if e < 0 || e >= hostileDevice {
			return
		}
		for _, a := range devSeen[e] {
			if a.thread != thread && (a.store || store) && !(!a.store && a.phase < phase) && (racePhase < 0 || phase < racePhase) {
				racePhase = phase
			}
		}
		devSeen[e] = append(devSeen[e], access{thread, phase, store})
	}
	dev := func(base uint64, e int64, store bool) {
		if !bound(base+uint64(4*e), store) && oobPhase < 0 {
			oobPhase = phase
		}
	}
	for _, op := range ops {
		o := int64(op.offset)
		switch op.kind {
		case tgStoreOne, tgLoadOne:
			note(4*o, op.thread, op.kind == tgStoreOne)
		case tgStoreAll, tgLoadAll:
			for th := 0; th < hostileThreads; th++ {
				note(4*(int64(th)+o), th, op.kind == tgStoreAll)
			}
		case staticStoreOne:
			if o < 0 || o >= hostileStatic {
				if oobPhase < 0 {
					oobPhase = phase
				}
			} else {
				note(4*hostileTG+4*o, op.thread, true)
			}
		case staticLoadAll:
			for th := 0; th < hostileThreads; th++ {
				if e := int64(th) + o; e < 0 || e >= hostileStatic {
					if oobPhase < 0 {
						oobPhase = phase
					}
				} else {
					note(4*hostileTG+4*e, th, false)
				}
			}
		case barrier:
			phase++
			clear(seen)
		case deviceStoreOne:
			dev(dBase, o, true)
			devNote(o, op.thread, true)
		case deviceLoadAll:
			for th := 0; th < hostileThreads; th++ {
				dev(dBase, int64(th)+o, false)
				devNote(int64(th)+o, th, false)
			}
		case constLoadOne:
			dev(cBase, o, false)
		}
	}
	for th := 0; th < hostileThreads; th++ {
		devNote(int64(th), th, true) // d[i] = acc
	}
	return oobPhase, racePhase
}

// FuzzHostileKernel generates small kernels indexing device, constant and
// threadgroup memory in and out of range, with barriers placed anywhere,
// and checks the emulator's promise in two scheduling orders: a kernel
// with an access outside its memory fails with an out-of-bounds fault (or
// a race, when one comes first), a kernel racing on threadgroup or device
// memory with a race, and any other kernel runs with no report; the process never
// dies. The seeds run in every go test.
func FuzzHostileKernel(f *testing.F) {
	le := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	}
	seed := func(ops []byte, offsets ...int32) []byte {
		return append(append([]byte{byte(len(ops)/2 - 1)}, ops...), le(offsets...)...)
	}
	for _, s := range [][]byte{
		seed([]byte{byte(tgStoreAll), 0, byte(barrier), 0, byte(tgLoadOne), 5}, 0, 0, 17),                      // in range, ordered
		seed([]byte{byte(tgStoreAll), 0, byte(tgLoadOne), 5}, 0, 17),                                           // race
		seed([]byte{byte(tgStoreOne), 63, byte(barrier), 0}, -40054),                                           // far before
		seed([]byte{byte(tgStoreOne), 63}, 312360),                                                             // far past
		seed([]byte{byte(tgLoadAll), 0}, 70),                                                                   // into s: inside an allocation
		seed([]byte{byte(tgLoadAll), 0}, 90),                                                                   // past s
		seed([]byte{byte(tgStoreOne), 3, byte(barrier), 0, byte(tgStoreOne), 4}, -1, 0),                        // just before
		seed([]byte{byte(staticStoreOne), 1, byte(barrier), 0, byte(staticLoadAll), 0}, 31, -32),               // s in range
		seed([]byte{byte(staticStoreOne), 1}, 32),                                                              // s past its end
		seed([]byte{byte(deviceStoreOne), 9, byte(deviceLoadAll), 0}, 127, 64),                                 // device in range
		seed([]byte{byte(deviceStoreOne), 9}, 128),                                                             // device past the end
		seed([]byte{byte(deviceLoadAll), 0}, -5000),                                                            // device far before
		seed([]byte{byte(constLoadOne), 2, byte(constLoadOne), 3}, 63, 64),                                     // constant past the end
		seed([]byte{byte(barrier), 0, byte(tgStoreAll), 0, byte(barrier), 0, byte(tgStoreAll), 0}, 0, 0, 0, 1), // ordered rewrites
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := hostileKernel(data)
		src := hostileSource(ops)
		fn := functionT(t, compileT(t, src, CompileOptions{}), "hostile")
		d, c, p := newF32(t, hostileDevice), newF32(t, hostileConst), newMem(t, 4*hostileMaxOps)
		for k, op := range ops {
			binary.LittleEndian.PutUint32(p.b[4*k:], uint32(op.offset))
		}
		dd := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{hostileThreads, 1, 1}), DeviceRaces: true}
		dd.Buffers[0], dd.Buffers[1], dd.Buffers[2] = d.binding(), c.binding(), p.binding()
		dd.ThreadgroupMemoryLength[0] = 4 * hostileTG
		ranges := [][2]uint64{}
		for _, b := range dd.Buffers[:3] {
			ranges = append(ranges, [2]uint64{uint64(b.Ptr), uint64(b.Ptr) + uint64(b.Len)})
		}
		bound := func(a uint64, store bool) bool {
			for _, r := range ranges {
				if a >= r[0] && a+4 <= r[1] {
					return true
				}
			}
			for _, s := range fn.modSegs {
				if !store && a >= s[0] && a+4 <= s[1] {
					return true // the library's constants
				}
			}
			return false
		}
		oob, race := hostileExpect(ops, bound, ranges[0][0], ranges[1][0])
		for _, order := range []Order{Forward, Reverse} {
			dd.Order = order
			_, err := fn.Run(dd)
			var ke *KernelError
			isBounds := errors.As(err, &ke) && (ke.kind == faultOutOfBounds || ke.kind == faultThreadgroupBounds || ke.kind == faultArrayBounds)
			isRace := errors.As(err, &ke) && ke.kind == faultRace
			ok := false
			switch {
			case oob < 0 && race < 0:
				ok = err == nil
			case race < 0 || (oob >= 0 && oob < race):
				ok = isBounds
			case oob < 0 || race < oob:
				ok = isRace
			default: // both in one phase
				ok = isBounds || isRace
			}
			if !ok {
				t.Fatalf("%v: kernel with its first refused access in phase %d and first race in phase %d (-1: none), offsets %v:\n%s\ngot %v", order, oob, race, offsetsOf(ops), src, err)
			}
		}
	})
}

func offsetsOf(ops []hostileOp) []int32 {
	o := make([]int32, len(ops))
	for i, op := range ops {
		o[i] = op.offset
	}
	return o
}
