package msl

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// pmDesc mirrors __pm_desc of rt/include/pm_abi.h.
type pmDesc struct {
	entry, moduleLo, moduleHi uint64
	bufPtr, bufLen, tgLen     [MaxBindings]uint64
	threadgroups              [3]uint64
	threadsPerThreadgroup     [3]uint64
	threadsPerGrid            [3]uint64
	order, seed, workers      uint64
	timeoutNS                 uint64
	loaded, stored            [MaxBindings]uint64
	simdOps, barriers         uint64
	faultKind                 uint64
	faultLine                 uint64
	faultPC                   uint64
	faultThreadgroup          [3]uint64
	faultThread               [3]uint64
	faultPC2                  uint64
	faultThread2              [3]uint64
	faultFile                 [256]byte
	faultMsg                  [768]byte
	trackSegments             uint64
	simdByOp                  [NumSIMDOps]uint64
	seg                       [MaxBindings][2]Segments
	segUntracked              uint64
	tgStatic                  uint64
	moduleSeg                 [maxModuleSegs][2]uint64
	deviceRaces               uint64
	readOnly                  uint64 // bit i: buffer(i) is one the kernel cannot store to
}

const (
	faultNone = iota
	faultOutOfBounds
	faultBarrierDivergence
	faultBarrierEarlyReturn
	faultSIMDDivergence
	faultDeadlock
	faultThreadgroupMemory
	faultResources
	faultIntegerDivision
	faultThreadgroupBounds
	faultArrayBounds
	faultStack
	faultTimeout
	faultRace
)

// DefaultTimeout is the time limit of a dispatch whose Dispatch.Timeout is
// zero, unless the environment variable PUREMETAL_EMU_TIMEOUT holds another
// duration (time.ParseDuration syntax, such as "5m"; "0" for no limit).
// Any other value of the variable makes such dispatches fail with an error
// naming it.
const DefaultTimeout = 60 * time.Second

var envTimeout = sync.OnceValues(func() (time.Duration, error) { return parseTimeout(os.Getenv("PUREMETAL_EMU_TIMEOUT")) })

// parseTimeout reads PUREMETAL_EMU_TIMEOUT: a positive duration, "0" for
// no limit (-1), DefaultTimeout if empty; anything else is an error.
func parseTimeout(v string) (time.Duration, error) {
	if v == "" {
		return DefaultTimeout, nil
	}
	t, err := time.ParseDuration(v)
	switch {
	case err != nil || t < 0:
		return 0, fmt.Errorf("PUREMETAL_EMU_TIMEOUT=%q is not a time limit: want a duration such as 90s or 5m (a number needs its unit), or 0 for none", v)
	case t == 0:
		return -1, nil
	}
	return t, nil
}

// envWorkers is the number of workers of a dispatch whose Dispatch.Workers
// is zero: PUREMETAL_EMU_WORKERS if set (to force many workers on a small
// machine, say), otherwise 0 (one per CPU). A value that is not a number
// from 0 to 64 is an error, which such a dispatch returns.
// envRaces is whether a dispatch whose Dispatch.DeviceRaces is false
// detects device memory races all the same: PUREMETAL_EMU_RACES=1 (0 or
// empty: no). Any other value is an error, which such a dispatch returns.
var envRaces = sync.OnceValues(func() (bool, error) { return parseRaces(os.Getenv("PUREMETAL_EMU_RACES")) })

func parseRaces(v string) (bool, error) {
	switch v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("PUREMETAL_EMU_RACES=%q is not a switch: want 1 (detect device memory races) or 0", v)
}

var envWorkers = sync.OnceValues(func() (int, error) { return parseWorkers(os.Getenv("PUREMETAL_EMU_WORKERS")) })

func parseWorkers(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxWorkers {
		return 0, fmt.Errorf("PUREMETAL_EMU_WORKERS=%q is not a number of workers: want 0 (one per CPU) to %d", v, maxWorkers)
	}
	return n, nil
}

// ErrEnvironment is wrapped by the error of [CheckEnvironment] for a
// PUREMETAL_EMU_WORKERS, PUREMETAL_EMU_TIMEOUT or PUREMETAL_EMU_RACES that
// holds no valid value.
var ErrEnvironment = errors.New("msl: invalid environment variable")

// CheckEnvironment reads PUREMETAL_EMU_WORKERS, PUREMETAL_EMU_TIMEOUT and
// PUREMETAL_EMU_RACES as they are now and returns an error wrapping [ErrEnvironment], naming
// the variable and its value, for one that a dispatch could not use, so
// that a program can report it before its first dispatch.
func CheckEnvironment() error {
	if _, err := parseWorkers(os.Getenv("PUREMETAL_EMU_WORKERS")); err != nil {
		return fmt.Errorf("%w: %v", ErrEnvironment, err)
	}
	if _, err := parseTimeout(os.Getenv("PUREMETAL_EMU_TIMEOUT")); err != nil {
		return fmt.Errorf("%w: %v", ErrEnvironment, err)
	}
	if _, err := parseRaces(os.Getenv("PUREMETAL_EMU_RACES")); err != nil {
		return fmt.Errorf("%w: %v", ErrEnvironment, err)
	}
	return nil
}

// maxWorkers is the most workers a dispatch runs on (the runtime's arenas).
const maxWorkers = 64

// Run executes one dispatch of f and returns its counters. Invalid
// dispatches return an error naming the argument; faults of the running
// kernel return a *KernelError. Run may be called from several goroutines
// at once.
func (f *Function) Run(d *Dispatch) (Counters, error) {
	if d == nil {
		return Counters{}, fmt.Errorf("msl: %s: nil Dispatch", f.Name)
	}
	desc := new(pmDesc)
	if err := f.fill(desc, d); err != nil {
		return Counters{}, err
	}
	r, _, _ := purego.SyscallN(rtDispatch, uintptr(unsafe.Pointer(desc)))
	var c Counters
	c.Loaded = desc.loaded
	c.Stored = desc.stored
	c.SIMDGroupOps = desc.simdOps
	c.Barriers = desc.barriers
	f.structure(&c, desc, d)
	if int64(r) != 0 || desc.faultKind == faultResources {
		return c, fmt.Errorf("msl: %s: %s", f.Name, cString(desc.faultMsg[:]))
	}
	if desc.faultKind != faultNone {
		e := f.kernelError(desc)
		if e.OutOfBounds() {
			// a pointer or reference of an unbound buffer is null, so an
			// access through it is out of bounds, at an address the fault
			// measures from some other buffer: the unbound buffers come
			// first, then the access
			var unbound []string
			for _, p := range f.Params {
				if p.Kind == Buffer && d.Buffers[p.Index].Ptr == 0 {
					unbound = append(unbound, fmt.Sprintf("buffer(%d) (parameter %s) is not bound", p.Index, p.Name))
				}
			}
			if unbound != nil {
				e.Msg = strings.Join(unbound, "; ") + "; the access: " + e.Msg
			}
		}
		return c, e
	}
	return c, nil
}

func (f *Function) fill(desc *pmDesc, d *Dispatch) error {
	g := d.Grid
	tptg := g.ThreadsPerThreadgroup
	for k, v := range tptg {
		if v <= 0 {
			return fmt.Errorf("msl: %s: Grid.ThreadsPerThreadgroup %v: dimension %d is %d, must be > 0", f.Name, g.ThreadsPerThreadgroup, k, v)
		}
	}
	if total, ok := product(tptg); !ok || total > uint64(f.MaxTotalThreadsPerThreadgroup) {
		return fmt.Errorf("msl: %s: Grid.ThreadsPerThreadgroup %v has %s threads, more than the function's maxTotalThreadsPerThreadgroup %d", f.Name, g.ThreadsPerThreadgroup, productString(tptg), f.MaxTotalThreadsPerThreadgroup)
	}
	tgs, threads := g.Threadgroups, g.Threads
	useThreads := threads != [3]int{}
	if useThreads == (tgs != [3]int{}) {
		return fmt.Errorf("msl: %s: exactly one of Grid.Threadgroups %v and Grid.Threads %v must be set", f.Name, g.Threadgroups, g.Threads)
	}
	for k := 0; k < 3; k++ {
		if useThreads {
			if threads[k] <= 0 {
				return fmt.Errorf("msl: %s: Grid.Threads %v: dimension %d is %d, must be > 0", f.Name, g.Threads, k, threads[k])
			}
			if uint64(threads[k]) >= 1<<32 {
				return fmt.Errorf("msl: %s: Grid.Threads %v: dimension %d has %d threads, more than 2^32-1", f.Name, g.Threads, k, threads[k])
			}
			tgs[k] = (threads[k] + tptg[k] - 1) / tptg[k]
		} else {
			if tgs[k] <= 0 {
				return fmt.Errorf("msl: %s: Grid.Threadgroups %v: dimension %d is %d, must be > 0", f.Name, g.Threadgroups, k, tgs[k])
			}
			if n, ok := product([3]int{tgs[k], tptg[k], 1}); !ok || n >= 1<<32 {
				return fmt.Errorf("msl: %s: grid dimension %d has %d threadgroups of %d threads, more than 2^32-1 threads", f.Name, k, tgs[k], tptg[k])
			}
			threads[k] = tgs[k] * tptg[k]
		}
		desc.threadgroups[k] = uint64(tgs[k])
		desc.threadsPerThreadgroup[k] = uint64(tptg[k])
		desc.threadsPerGrid[k] = uint64(threads[k])
	}
	if ntg, ok := product(tgs); !ok || ntg >= 1<<32 {
		return fmt.Errorf("msl: %s: %s threadgroups, more than 2^32-1", f.Name, productString(tgs))
	}
	switch d.Order {
	case Forward, Reverse, Shuffled:
	default:
		return fmt.Errorf("msl: %s: Dispatch.Order %d is not Forward, Reverse or Shuffled", f.Name, int(d.Order))
	}
	if d.Workers < 0 {
		return fmt.Errorf("msl: %s: Dispatch.Workers is %d, must be >= 0", f.Name, d.Workers)
	}
	for i, b := range d.Buffers {
		if b.Len < 0 {
			return fmt.Errorf("msl: %s: Dispatch.Buffers[%d].Len is %d, must be >= 0", f.Name, i, b.Len)
		}
		if b.Ptr == 0 && b.Len != 0 {
			return fmt.Errorf("msl: %s: Dispatch.Buffers[%d] has length %d but a nil pointer", f.Name, i, b.Len)
		}
		if end := uint64(b.Ptr) + uint64(b.Len); end < uint64(b.Ptr) {
			return fmt.Errorf("msl: %s: Dispatch.Buffers[%d] at %#x with length %d wraps around the address space", f.Name, i, b.Ptr, b.Len)
		}
		desc.bufPtr[i] = uint64(b.Ptr)
		desc.bufLen[i] = uint64(b.Len)
	}
	tgTotal := 0
	for i, n := range d.ThreadgroupMemoryLength {
		if n < 0 || n%16 != 0 {
			return fmt.Errorf("msl: %s: Dispatch.ThreadgroupMemoryLength[%d] is %d, must be a non-negative multiple of 16", f.Name, i, n)
		}
		if n > MaxThreadgroupMemoryLength {
			// checked one by one, so that the sum cannot overflow
			return fmt.Errorf("msl: %s: Dispatch.ThreadgroupMemoryLength[%d] is %d bytes, more than %d", f.Name, i, n, MaxThreadgroupMemoryLength)
		}
		tgTotal += n
		desc.tgLen[i] = uint64(n)
	}
	if tgTotal > MaxThreadgroupMemoryLength {
		return fmt.Errorf("msl: %s: threadgroup memory lengths add up to %d bytes, more than %d", f.Name, tgTotal, MaxThreadgroupMemoryLength)
	}
	// A buffer parameter may be left unbound, as in Metal, where only the
	// arguments a function uses need a binding (MLX's gemv binds no bias
	// without axpby): its pointer is null, and an access through it is an
	// out-of-bounds fault naming the unbound buffers.
	for _, p := range f.Params {
		if p.Kind == ThreadgroupMemory && d.ThreadgroupMemoryLength[p.Index] == 0 {
			return fmt.Errorf("msl: %s: threadgroup(%d) (parameter %s) has no threadgroup memory length set", f.Name, p.Index, p.Name)
		}
	}
	if d.CountSegments {
		desc.trackSegments = 1
	}
	races := d.DeviceRaces
	if !races {
		var err error
		if races, err = envRaces(); err != nil {
			return fmt.Errorf("msl: %s: Dispatch.DeviceRaces is false and %v", f.Name, err)
		}
	}
	if races {
		desc.deviceRaces = 1
		for _, p := range f.Params {
			if p.Kind == Buffer && p.ReadOnly {
				desc.readOnly |= 1 << p.Index
			}
		}
	}
	desc.entry = uint64(f.entry)
	desc.moduleLo, desc.moduleHi = f.modLo, f.modHi
	desc.moduleSeg = f.modSegs
	desc.order = uint64(d.Order)
	desc.seed = d.Seed
	desc.workers = uint64(d.Workers)
	if d.Workers == 0 {
		n, err := envWorkers()
		if err != nil {
			return fmt.Errorf("msl: %s: Dispatch.Workers is 0 and %v", f.Name, err)
		}
		desc.workers = uint64(n)
	}
	timeout := d.Timeout
	if timeout == 0 {
		var err error
		if timeout, err = envTimeout(); err != nil {
			return fmt.Errorf("msl: %s: Dispatch.Timeout is 0 and %v", f.Name, err)
		}
	}
	if timeout > 0 {
		desc.timeoutNS = uint64(timeout)
	}
	return nil
}

// arenaStats reports how many worker arenas (fiber stacks and threadgroup
// memory of one worker) exist, and how many of them are idle.
func arenaStats() (arenas, idle uint64) {
	purego.SyscallN(rtArenas, uintptr(unsafe.Pointer(&arenas)), uintptr(unsafe.Pointer(&idle)))
	return arenas, idle
}

// product multiplies three positive sizes, reporting false if the product
// does not fit in 64 bits.
func product(v [3]int) (uint64, bool) {
	p := uint64(1)
	for _, x := range v {
		hi, lo := bits.Mul64(p, uint64(x))
		if hi != 0 {
			return 0, false
		}
		p = lo
	}
	return p, true
}

// productString is the exact product of three positive sizes, for errors.
func productString(v [3]int) string {
	p := big.NewInt(1)
	for _, x := range v {
		p.Mul(p, big.NewInt(int64(x)))
	}
	return p.String()
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (f *Function) kernelError(desc *pmDesc) *KernelError {
	e := &KernelError{
		Kernel: f.Name,
		File:   cString(desc.faultFile[:]),
		Line:   int(desc.faultLine),
		Msg:    cString(desc.faultMsg[:]),
		kind:   desc.faultKind,
	}
	for k := 0; k < 3; k++ {
		e.Threadgroup[k] = int(desc.faultThreadgroup[k])
		e.Thread[k] = int(desc.faultThread[k])
	}
	if desc.faultPC != 0 {
		e.File, e.Line = f.lib.symbolize(desc.faultPC-f.modBase-1, f.fileName)
	}
	if e.File == "" {
		e.File = f.fileName
	}
	if desc.faultPC2 != 0 {
		file, line := f.lib.symbolize(desc.faultPC2-f.modBase-1, f.fileName)
		if line > 0 {
			e.Msg += fmt.Sprintf("; the other access is at %s:%d", file, line)
		}
	}
	return e
}

var addr2line = sync.OnceValue(func() string {
	for _, name := range []string{"addr2line", "llvm-addr2line"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
})

// symbolize finds the source line of a code offset in the library, using
// the innermost inlined frame that lies in the kernel source file or in one
// of the program's headers.
func (l *Library) symbolize(offset uint64, file string) (string, int) {
	tool := addr2line()
	if tool == "" {
		return file, 0
	}
	out, err := exec.Command(tool, "-i", "-e", l.path, "0x"+strconv.FormatUint(offset, 16)).Output()
	if err != nil {
		return file, 0
	}
	for _, ln := range strings.Split(string(out), "\n") {
		if i := strings.Index(ln, " ("); i >= 0 {
			ln = ln[:i]
		}
		c := strings.LastIndexByte(ln, ':')
		if c < 0 {
			continue
		}
		name, num := ln[:c], ln[c+1:]
		if name == file || filepath.Base(name) == filepath.Base(file) {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				return file, n
			}
		}
		// a header of the program (CompileOptions.IncludeDirs); a relative
		// name is shown joined to the compilation's directory
		for f := range l.files {
			if name == f || !filepath.IsAbs(f) && strings.HasSuffix(name, "/"+f) {
				if n, err := strconv.Atoi(num); err == nil && n > 0 {
					return f, n
				}
			}
		}
	}
	return file, 0
}
