package msl

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
)

// MaxPrivateBytes is the stack a kernel's thread may use for its own
// frames (private arrays, spilled registers, the frames of the functions it
// calls): a thread runs on a 64 KiB stack, of which 16 KiB are kept for the
// runtime and the C library functions kernels call.
const MaxPrivateBytes = 48 * 1024

// callFrame is the return address and saved frame pointer a call adds to
// the frames the compiler reports.
const callFrame = 16

// stackNeeds returns, for each entry point of the compiled library at
// path, the stack its thread needs: its frame plus the deepest chain of
// frames of the library's functions it calls, from the frame sizes the
// compiler writes into the .stack_sizes section (-fstack-size-section)
// and the direct calls found in the machine code. A call the scan cannot
// rule out counts, so the need is never underestimated; recursion (which
// Metal does not allow) is counted once around the cycle.
func stackNeeds(path string, entries int) ([]int, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if entries == 0 {
		return nil, nil // a library without kernels (helper functions only, or none)
	}
	sec := f.Section(".stack_sizes")
	if sec == nil {
		return nil, fmt.Errorf("%s has no .stack_sizes section", path)
	}
	raw, err := sec.Data()
	if err != nil {
		return nil, err
	}
	frame := map[uint64]uint64{}
	for len(raw) > 0 {
		if len(raw) < 9 {
			return nil, fmt.Errorf("%s: truncated .stack_sizes section", path)
		}
		addr := binary.LittleEndian.Uint64(raw)
		size, n := binary.Uvarint(raw[8:])
		if n <= 0 {
			return nil, fmt.Errorf("%s: malformed .stack_sizes section", path)
		}
		raw = raw[8+n:]
		frame[addr] = size
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	type fn struct{ addr, size uint64 }
	byName := map[string]fn{}
	var fns []fn
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			byName[s.Name] = fn{s.Value, s.Size}
			if _, ok := frame[s.Value]; ok {
				fns = append(fns, fn{s.Value, s.Size})
			}
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].addr < fns[j].addr })
	code := func(g fn) []byte {
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && g.addr >= p.Vaddr && g.addr+g.size <= p.Vaddr+p.Filesz {
				b := make([]byte, g.size)
				if _, err := p.ReadAt(b, int64(g.addr-p.Vaddr)); err == nil {
					return b
				}
			}
		}
		return nil
	}
	// calls, and jumps to the start of a function (tail calls: the
	// callee's frame replaces the caller's)
	calls, jumps := map[uint64][]uint64{}, map[uint64][]uint64{}
	add := func(m map[uint64][]uint64, from, to uint64) {
		if _, ok := frame[to]; ok {
			m[from] = append(m[from], to)
		}
	}
	for _, g := range fns {
		b := code(g)
		switch f.Machine {
		case elf.EM_X86_64:
			// call rel32 (e8), jmp rel32 (e9), jcc rel32 (0f 80..8f), jmp
			// rel8 (eb: a launcher's tail call of its kernel, just below
			// it); any such bytes are taken for one
			for i := 0; i+2 <= len(b); i++ {
				if b[i] == 0xeb {
					add(jumps, g.addr, g.addr+uint64(i)+2+uint64(int64(int8(b[i+1]))))
				}
				if i+5 > len(b) {
					continue
				}
				rel := func(at int) uint64 {
					return g.addr + uint64(at) + 4 + uint64(int64(int32(binary.LittleEndian.Uint32(b[at:]))))
				}
				switch {
				case b[i] == 0xe8:
					add(calls, g.addr, rel(i+1))
				case b[i] == 0xe9:
					add(jumps, g.addr, rel(i+1))
				case b[i] == 0x0f && b[i+1]&0xf0 == 0x80 && i+6 <= len(b):
					add(jumps, g.addr, rel(i+2))
				}
			}
		case elf.EM_AARCH64:
			// bl imm26, b imm26, b.cond imm19
			for i := 0; i+4 <= len(b); i += 4 {
				w := binary.LittleEndian.Uint32(b[i:])
				at := g.addr + uint64(i)
				switch {
				case w&0xfc000000 == 0x94000000:
					add(calls, g.addr, at+uint64(int64(int32(w<<6))>>4))
				case w&0xfc000000 == 0x14000000:
					add(jumps, g.addr, at+uint64(int64(int32(w<<6))>>4))
				case w&0xff000010 == 0x54000000:
					add(jumps, g.addr, at+uint64(int64(int32(w<<8))>>11&^3))
				}
			}
		default:
			return nil, fmt.Errorf("%s: unsupported machine %v", path, f.Machine)
		}
	}
	memo := map[uint64]uint64{}
	onPath := map[uint64]bool{}
	var need func(a uint64) uint64
	need = func(a uint64) uint64 {
		if n, ok := memo[a]; ok {
			return n
		}
		if onPath[a] {
			return 0
		}
		onPath[a] = true
		var deepest uint64
		for _, c := range calls[a] {
			deepest = max(deepest, need(c)+callFrame)
		}
		n := frame[a] + deepest
		for _, j := range jumps[a] {
			n = max(n, need(j))
		}
		onPath[a] = false
		memo[a] = n
		return n
	}
	out := make([]int, entries)
	for i := range out {
		g, ok := byName[entrySymbol(i)]
		if !ok {
			return nil, fmt.Errorf("%s: no function %s", path, entrySymbol(i))
		}
		out[i] = int(need(g.addr)) + callFrame
	}
	return out, nil
}

// maxModuleSegs is the most readable segments a kernel library may have
// (__PM_MODULE_SEGS).
const maxModuleSegs = 8

// readableSegments returns the address ranges, before relocation, of the
// readable loaded segments of the library at path: where its constants
// lie. The pages between segments may be unmapped, so a kernel's load is
// checked against these, not against the library's whole range.
func readableSegments(path string) ([][2]uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var segs [][2]uint64
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_R == 0 || p.Memsz == 0 {
			continue
		}
		if len(segs) == maxModuleSegs {
			return nil, fmt.Errorf("more than %d readable segments", maxModuleSegs)
		}
		segs = append(segs, [2]uint64{p.Vaddr, p.Vaddr + p.Memsz})
	}
	return segs, nil
}
