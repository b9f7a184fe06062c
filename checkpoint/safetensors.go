package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/internal/floats"
)

// A Safetensors is a parsed safetensors file (the format HF checkpoints are
// stored in): an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and byte range, then the tensors' bytes.
// Every range is checked against the file, its dtype's size and its shape
// when the file is parsed, so reading a tensor cannot go out of range.
type Safetensors struct {
	tensors map[string]Tensor
	names   []string
}

// ErrMalformed is returned (wrapped) for a safetensors file whose bytes
// do not hold what its header says: truncated, offsets outside the data or
// overlapping, an unknown dtype, a shape that does not match the byte count.
var ErrMalformed = errors.New("checkpoint: malformed safetensors file")

// A Tensor is one tensor of a safetensors file: its dtype ("F32", "F16" or
// "BF16" are the ones [Tensor.Float32s] widens), its shape, outermost first,
// and its bytes (little-endian).
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
	// Offset is Data's offset in the file (header included), for views
	// over a mapped file (such as a Metal buffer over the mapping).
	Offset int64
}

// maxHeader bounds the JSON header (the reference implementation's limit is
// 100 MB).
const maxHeader = 100 << 20

// dtypeSize is the size in bytes of each dtype a safetensors file may hold.
var dtypeSize = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// ReadSafetensors reads and parses the safetensors file at path.
func ReadSafetensors(path string) (*Safetensors, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	st, err := ParseSafetensors(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return st, nil
}

// malformed returns an error wrapping ErrMalformed with the formatted
// text, which may wrap errors of its own.
func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

// ParseSafetensors parses a whole safetensors file held in data. The
// tensors share data's bytes. A truncated or malformed file is an error
// wrapping [ErrMalformed] saying what and where; nothing panics.
func ParseSafetensors(data []byte) (*Safetensors, error) {
	if len(data) < 8 {
		return nil, malformed("%d bytes, fewer than the 8 of the header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeader {
		return nil, malformed("header length %d bytes, beyond the %d a file may have", n, maxHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, malformed("header length %d bytes, but the file has %d bytes after the length: truncated", n, len(data)-8)
	}
	header := data[8 : 8+n]
	body := data[8+n:]
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return nil, malformed("header: %w", err)
	}
	st := &Safetensors{tensors: make(map[string]Tensor, len(raw))}
	type span struct {
		begin, end uint64
		name       string
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var info struct {
			DType       string   `json:"dtype"`
			Shape       []int    `json:"shape"`
			DataOffsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &info); err != nil {
			return nil, malformed("tensor %q: %w", name, err)
		}
		size, ok := dtypeSize[info.DType]
		if !ok {
			return nil, malformed("tensor %q: unknown dtype %q", name, info.DType)
		}
		if len(info.DataOffsets) != 2 {
			return nil, malformed("tensor %q: data_offsets has %d numbers, want 2", name, len(info.DataOffsets))
		}
		begin, end := info.DataOffsets[0], info.DataOffsets[1]
		if begin > end || end > uint64(len(body)) {
			return nil, malformed("tensor %q: bytes [%d, %d) outside the %d bytes of data: truncated or malformed", name, begin, end, len(body))
		}
		elems := uint64(1)
		for _, d := range info.Shape {
			if d < 0 {
				return nil, malformed("tensor %q: shape %v has a negative dimension", name, info.Shape)
			}
			if d != 0 && elems > math.MaxInt64/uint64(d) {
				return nil, malformed("tensor %q: shape %v overflows", name, info.Shape)
			}
			elems *= uint64(d)
		}
		if elems > math.MaxInt64/uint64(size) || elems*uint64(size) != end-begin {
			return nil, malformed("tensor %q: %d bytes for shape %v of %s, which needs %d elements of %d bytes", name, end-begin, info.Shape, info.DType, elems, size)
		}
		st.tensors[name] = Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: body[begin:end:end], Offset: int64(8 + n + begin)}
		st.names = append(st.names, name)
		spans = append(spans, span{begin, end, name})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].begin < spans[j].begin })
	for i := 1; i < len(spans); i++ {
		if spans[i].begin < spans[i-1].end {
			return nil, malformed("tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	slices.Sort(st.names)
	return st, nil
}

// Names returns the names of the file's tensors, sorted.
func (st *Safetensors) Names() []string { return slices.Clone(st.names) }

// Tensor returns the tensor called name.
func (st *Safetensors) Tensor(name string) (Tensor, bool) {
	t, ok := st.tensors[name]
	return t, ok
}

// Float32s returns the tensor's elements widened to float32: F32, F16 and
// BF16 tensors; another dtype is an error.
func (t Tensor) Float32s() ([]float32, error) {
	switch t.DType {
	case "F32":
		return floats.FromBytes(t.Data), nil
	case "F16":
		x := make([]float32, len(t.Data)/2)
		half.DecodeFloat16(x, t.Data)
		return x, nil
	case "BF16":
		x := make([]float32, len(t.Data)/2)
		half.DecodeBFloat16(x, t.Data)
		return x, nil
	}
	return nil, fmt.Errorf("checkpoint: tensor %q: dtype %s, want F32, F16 or BF16", t.Name, t.DType)
}

// Elems returns the tensor's element count (the product of its shape).
func (t Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// WriteSafetensors writes tensors as a safetensors file, in the order
// given, each tensor's Data holding its bytes; a tensor whose bytes do not
// match its dtype and shape, or a repeated name, is an error.
func WriteSafetensors(w io.Writer, tensors []Tensor) error {
	header := map[string]any{}
	var off uint64
	for _, t := range tensors {
		if _, dup := header[t.Name]; dup || t.Name == "__metadata__" {
			return fmt.Errorf("checkpoint: safetensors: tensor name %q repeated or reserved", t.Name)
		}
		size, ok := dtypeSize[t.DType]
		if !ok {
			return fmt.Errorf("checkpoint: safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		if t.Elems()*size != len(t.Data) {
			return fmt.Errorf("checkpoint: safetensors: tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []uint64{off, off + uint64(len(t.Data))}}
		off += uint64(len(t.Data))
	}
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ') // the data starts 8-byte aligned, as the reference writer pads
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	if _, err := w.Write(n[:]); err != nil {
		return fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	if _, err := w.Write(h); err != nil {
		return fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("checkpoint: safetensors: %w", err)
		}
	}
	return nil
}

// NewTensor returns a tensor of dtype "F32", "F16" or "BF16" holding x
// (rounded to nearest even for the 16-bit types), for [WriteSafetensors].
func NewTensor(name, dtype string, shape []int, x []float32) (Tensor, error) {
	t := Tensor{Name: name, DType: dtype, Shape: slices.Clone(shape)}
	if t.Elems() != len(x) {
		return Tensor{}, fmt.Errorf("checkpoint: tensor %q: %d values for shape %v", name, len(x), shape)
	}
	switch dtype {
	case "F32":
		t.Data = floats.Bytes(x...)
	case "F16":
		t.Data = make([]byte, 2*len(x))
		half.EncodeFloat16(t.Data, x)
	case "BF16":
		t.Data = make([]byte, 2*len(x))
		half.EncodeBFloat16(t.Data, x)
	default:
		return Tensor{}, fmt.Errorf("checkpoint: tensor %q: dtype %q, want F32, F16 or BF16", name, dtype)
	}
	return t, nil
}
