package msl

import (
	"fmt"
	"strings"
	"testing"
)

// deviceRaceSrc holds one kernel per case of TestDeviceRaces; every
// kernel races (or not) on buffer(0), and runs in a grid of 1,024 threads.
const deviceRaceSrc = mslPrelude + `kernel void increment(device float* y [[buffer(0)]]) {
    y[0] += 1; // increment
}
kernel void increment_first(device float* y [[buffer(0)]],
                            uint lid [[thread_index_in_threadgroup]]) {
    if (lid == 0) y[0] += 1; // increment_first
}
kernel void store_store(device uint* y [[buffer(0)]],
                        uint lid [[thread_index_in_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
    if (lid == 0) y[0] = tg; // store_store
}
kernel void load_store_groups(device float* y [[buffer(0)]],
                              uint lid [[thread_index_in_threadgroup]],
                              uint tg [[threadgroup_position_in_grid]]) {
    if (lid == 0 && tg == 0) y[0] = 1; // load_store_groups store
    if (lid == 1 && tg == 1) y[1] = y[0]; // load_store_groups load
}
kernel void neighbour(device float* y [[buffer(0)]],
                      constant uint& mode [[buffer(1)]],
                      device float* out [[buffer(2)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_index_in_threadgroup]],
                      uint n [[threads_per_threadgroup]],
                      uint tg [[threadgroup_position_in_grid]]) {
    y[gid] = float(gid); // neighbour store
    if (mode == 1) threadgroup_barrier(mem_flags::mem_device);
    if (mode == 2) threadgroup_barrier(mem_flags::mem_threadgroup);
    if (mode == 3) threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    out[gid] = y[tg * n + (lid + 33) % n]; // neighbour load
}
kernel void lanes(device float* y [[buffer(0)]],
                  constant uint& mode [[buffer(1)]],
                  uint gid [[thread_position_in_grid]],
                  uint lane [[thread_index_in_simdgroup]]) {
    y[gid] = float(gid); // lanes store
    if (mode == 1) simdgroup_barrier(mem_flags::mem_device);
    if (mode == 2) (void)simd_any(true);
    if (mode == 3) simdgroup_barrier(mem_flags::mem_threadgroup);
    float v = y[gid ^ 1]; // lanes load
    simdgroup_barrier(mem_flags::mem_device);
    y[gid] = v;
}
kernel void count(device atomic_uint* y [[buffer(0)]]) {
    atomic_fetch_add_explicit(y, 1u, memory_order_relaxed);
    (void)atomic_load_explicit(y, memory_order_relaxed);
}
kernel void disjoint(device float* y [[buffer(0)]],
                     uint gid [[thread_position_in_grid]]) {
    y[gid] = y[gid] * 2 + 1;
    y[gid] += 1;
}
kernel void adjacent(device uchar* y [[buffer(0)]],
                     device half* h [[buffer(1)]],
                     uint gid [[thread_position_in_grid]]) {
    y[gid] = uchar(gid);
    h[gid] = half(gid);
}
kernel void readers(device float* y [[buffer(0)]],
                    device float* x [[buffer(1)]],
                    device const float* w [[buffer(2)]],
                    uint gid [[thread_position_in_grid]]) {
    float s = 0;
    for (uint i = 0; i < 64; i++) s += x[i] * w[i];
    y[gid] = s;
}
`

// lineOf is the line of src holding the comment // mark.
func lineOf(t *testing.T, src, mark string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.HasSuffix(l, "// "+mark) {
			return i + 1
		}
	}
	t.Fatalf("no line marked %q", mark)
	return 0
}

// Conflicting accesses to device memory by threads of one dispatch that
// nothing orders are reported with Dispatch.DeviceRaces, naming both
// accesses, in every scheduling order; ordered, atomic, disjoint and
// read-only accesses are not.
func TestDeviceRaces(t *testing.T) {
	lib := compileT(t, deviceRaceSrc, CompileOptions{})
	type race struct {
		between     bool   // between threadgroups rather than within one
		lines       string // the marks of the two accesses' lines, "a|b"
		first, what string // the reported access and the other's kind, in the message
	}
	for _, c := range []struct {
		name   string
		groups int // threadgroups of 1024/groups threads
		mode   uint32
		race   *race // nil: none
	}{
		{"increment", 1, 0, &race{false, "increment|increment", "", "store"}},
		{"increment", 4, 0, &race{false, "increment|increment", "", "store"}},
		{"increment_first", 4, 0, &race{true, "increment_first|increment_first", "", "store"}},
		{"store_store", 8, 0, &race{true, "store_store|store_store", "store", "store"}},
		{"load_store_groups", 2, 0, &race{true, "load_store_groups store|load_store_groups load", "", ""}},
		{"neighbour", 4, 0, &race{false, "neighbour store|neighbour load", "", ""}},
		{"neighbour", 4, 1, nil},
		{"neighbour", 4, 2, &race{false, "neighbour store|neighbour load", "", ""}},
		{"neighbour", 4, 3, nil},
		{"lanes", 4, 0, &race{false, "lanes store|lanes load", "", ""}},
		{"lanes", 4, 1, nil},
		{"lanes", 4, 2, nil},
		{"lanes", 4, 3, &race{false, "lanes store|lanes load", "", ""}},
		{"count", 4, 0, nil},
		{"disjoint", 4, 0, nil},
		{"adjacent", 8, 0, nil},
		{"readers", 4, 0, nil},
	} {
		f := functionT(t, lib, c.name)
		y, x, w := newMem(t, 4096), newMem(t, 4096), newMem(t, 4096)
		mode := newMem(t, 4)
		mode.u32()[0] = c.mode
		for _, order := range []Order{Forward, Reverse, Shuffled} {
			name := fmt.Sprintf("%s/%d groups/mode %d/%v", c.name, c.groups, c.mode, order)
			d := &Dispatch{Grid: ThreadgroupsGrid([3]int{c.groups, 1, 1}, [3]int{1024 / c.groups, 1, 1}), Order: order, Seed: 7, DeviceRaces: true}
			d.Buffers[0], d.Buffers[2] = y.binding(), w.binding()
			d.Buffers[1] = x.binding()
			if c.name == "neighbour" || c.name == "lanes" {
				d.Buffers[1] = mode.binding()
			}
			_, err := f.Run(d)
			if c.race == nil {
				if err != nil {
					t.Errorf("%s: %v, want no race", name, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: no race reported", name)
				continue
			}
			ke := kernelErrorT(t, err)
			marks := strings.Split(c.race.lines, "|")
			a, b := lineOf(t, deviceRaceSrc, marks[0]), lineOf(t, deviceRaceSrc, marks[1])
			other := b
			if ke.Line == b {
				other = a
			}
			kind := "device memory race: "
			if c.race.between {
				kind = "device memory race between threadgroups: "
			}
			if ke.Line != a && ke.Line != b || !strings.HasPrefix(ke.Msg, kind) || !strings.Contains(ke.Msg, "buffer(0)") ||
				!strings.Contains(ke.Msg, fmt.Sprintf("the other access is at program_source:%d", other)) ||
				!strings.Contains(ke.Msg, "this thread's "+c.race.first) || !strings.Contains(ke.Msg, "and a "+c.race.what) {
				t.Errorf("%s: %v (line %d), want a %q naming lines %d and %d", name, ke, ke.Line, kind, a, b)
			}
		}
	}
}

// Without Dispatch.DeviceRaces (and PUREMETAL_EMU_RACES) a device race
// runs as before: the threads run one at a time, and lose no update.
func TestDeviceRacesOff(t *testing.T) {
	t.Setenv("PUREMETAL_EMU_RACES", "")
	if on, _ := envRaces(); on {
		t.Skip("PUREMETAL_EMU_RACES=1 for the whole run")
	}
	f := functionT(t, compileT(t, deviceRaceSrc, CompileOptions{}), "increment")
	y := newF32(t, 1)
	d := &Dispatch{Grid: ThreadgroupsGrid([3]int{1, 1, 1}, [3]int{1024, 1, 1})}
	d.Buffers[0] = y.binding()
	if _, err := f.Run(d); err != nil || y.f32()[0] != 1024 {
		t.Fatalf("y[0] = %v, %v; want 1024 and no error", y.f32()[0], err)
	}
}

func TestParseRaces(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true} {
		if got, err := parseRaces(v); err != nil || got != want {
			t.Errorf("parseRaces(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"yes", "2", " 1"} {
		if _, err := parseRaces(v); err == nil || !strings.Contains(err.Error(), "PUREMETAL_EMU_RACES") {
			t.Errorf("parseRaces(%q) = %v; want an error naming the variable", v, err)
		}
	}
}
