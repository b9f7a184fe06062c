package model

import (
	"fmt"
	"unsafe"

	"github.com/puremetal/puremetal/checkpoint"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/ops"
	"github.com/puremetal/puremetal/tensor"
)

// weights hands a checkpoint's tensors to Metal: one no-copy buffer over
// each mapped file's pages, and views at the tensors' offsets. A tensor
// the kernels cannot take in place (an offset not aligned for its type,
// rows to permute, experts not stacked in one run, a type a kernel
// insists on) is copied into a buffer of its own, and counted.
type weights struct {
	dev    *mtl.Device
	ck     *checkpoint.Model
	files  []*mtl.Buffer // one per ck.Files, over its pages
	owned  []*mtl.Buffer // buffers of copied tensors
	copied int64         // bytes copied
	err    error         // the first error
}

func newWeights(dev *mtl.Device, ck *checkpoint.Model) (*weights, error) {
	w := &weights{dev: dev, ck: ck}
	for _, f := range ck.Files {
		b, err := dev.NewBufferOverMemory(f.Pages(), mtl.ResourceStorageModeShared)
		if err != nil {
			w.release()
			return nil, fmt.Errorf("model: %s: %w", f.Path, err)
		}
		w.files = append(w.files, b)
	}
	return w, nil
}

func (w *weights) release() {
	for _, b := range append(w.files, w.owned...) {
		b.Release()
	}
	w.files, w.owned = nil, nil
}

func (w *weights) fail(err error) {
	if w.err == nil && err != nil {
		w.err = err
	}
}

// elemType is the element type of a safetensors dtype.
func elemType(dtype string) (tensor.ElemType, bool) {
	switch dtype {
	case "F32":
		return tensor.F32, true
	case "F16":
		return tensor.F16, true
	case "BF16":
		return tensor.BF16, true
	case "U32":
		return tensor.U32, true
	}
	return 0, false
}

// locate returns the file buffer holding t's bytes and their offset in it.
func (w *weights) locate(t checkpoint.Tensor) (*mtl.Buffer, int, bool) {
	if len(t.Data) == 0 {
		return nil, 0, false
	}
	p := uintptr(unsafe.Pointer(&t.Data[0]))
	for i, f := range w.ck.Files {
		pages := f.Pages()
		base := uintptr(unsafe.Pointer(&pages[0]))
		if p >= base && p+uintptr(len(t.Data)) <= base+uintptr(len(pages)) {
			return w.files[i], int(p - base), true
		}
	}
	return nil, 0, false
}

// get returns the canonical weight name, remembering a missing one.
func (w *weights) get(name string) *checkpoint.Weight {
	if w.err != nil {
		return nil
	}
	cw, err := w.ck.Weight(name)
	w.fail(err)
	return cw
}

// tensor returns a view of t in place when its type is want (or want is
// 0 and t is any float type... see floatView) and its offset is aligned,
// else a converted copy of type want.
func (w *weights) view(t checkpoint.Tensor, want tensor.ElemType) tensor.View {
	if w.err != nil {
		return tensor.View{}
	}
	typ, ok := elemType(t.DType)
	if !ok {
		w.fail(fmt.Errorf("model: %s: dtype %s, the kernels take F32, F16, BF16 and U32", t.Name, t.DType))
		return tensor.View{}
	}
	n := len(t.Data) / typ.Size()
	if b, off, ok := w.locate(t); ok && typ == want && off%typ.Size() == 0 {
		return tensor.NewView(b, off, typ, n)
	}
	if typ == tensor.U32 || want == tensor.U32 {
		if typ != want {
			w.fail(fmt.Errorf("model: %s: dtype %s where %v is needed", t.Name, t.DType, want))
			return tensor.View{}
		}
		return w.copyBytes(t.Data, typ, n)
	}
	x, err := t.Float32s()
	if err != nil {
		w.fail(err)
		return tensor.View{}
	}
	v := w.alloc(want, n)
	w.fail(v.Store(x))
	return v
}

// float returns t in place, in whatever float type it is stored.
func (w *weights) float(t checkpoint.Tensor) tensor.View {
	typ, ok := elemType(t.DType)
	if !ok || typ == tensor.U32 {
		w.fail(fmt.Errorf("model: %s: dtype %s is not a float type", t.Name, t.DType))
		return tensor.View{}
	}
	return w.view(t, typ)
}

// alloc returns a zeroed view of n elements of typ in a buffer of its own,
// counted as copied.
func (w *weights) alloc(typ tensor.ElemType, n int) tensor.View {
	if w.err != nil {
		return tensor.View{}
	}
	b, err := w.dev.NewBuffer(max(1, n*typ.Size()), mtl.ResourceStorageModeShared)
	if err != nil {
		w.fail(err)
		return tensor.View{}
	}
	w.owned = append(w.owned, b)
	w.copied += int64(n * typ.Size())
	return tensor.NewView(b, 0, typ, n)
}

// copyBytes copies raw bytes into a view of their own.
func (w *weights) copyBytes(data []byte, typ tensor.ElemType, n int) tensor.View {
	v := w.alloc(typ, n)
	if w.err == nil {
		copy(v.Buffer.Contents()[v.Offset:], data)
	}
	return v
}

// linear is a linear layer's weight W [out][in]: dense, or MLX
// affine-quantized (q.Bits > 0); with experts > 0, that many matrices
// stacked.
type linear struct {
	w       tensor.View
	q       ops.QuantWeight
	in, out int
	experts int
}

func (l linear) quantized() bool { return l.q.Bits > 0 }

// linear returns the weight name as a linear layer, in place.
func (w *weights) linear(name string) linear {
	cw := w.get(name)
	if cw == nil {
		return linear{}
	}
	return w.linearOf(cw)
}

func (w *weights) linearOf(cw *checkpoint.Weight) linear {
	out, in := cw.Shape[0], cw.Shape[len(cw.Shape)-1]
	if len(cw.Shape) == 1 {
		out, in = 1, cw.Shape[0]
	}
	l := linear{in: in, out: out}
	if !cw.Quantized() {
		l.w = w.float(cw.Data)
		return l
	}
	l.q = ops.QuantWeight{Words: w.view(cw.Data, tensor.U32), Scales: w.float(cw.Scales), Biases: w.float(cw.Biases),
		Rows: out, Cols: in, Bits: cw.Quant.Bits, GroupSize: cw.Quant.GroupSize}
	return l
}

// rowBytes returns the bytes of one row of each of a weight's stored
// tensors: the data, and the scales and biases when quantized.
func rowParts(cw *checkpoint.Weight) []checkpoint.Tensor {
	if cw.Quantized() {
		return []checkpoint.Tensor{cw.Data, cw.Scales, cw.Biases}
	}
	return []checkpoint.Tensor{cw.Data}
}

// permuted returns the weight name with its rows reordered (row i of the
// result is row rows[i] of the stored weight), copied.
func (w *weights) permuted(name string, rows []int) linear {
	cw := w.get(name)
	if cw == nil {
		return linear{}
	}
	var views []tensor.View
	for _, t := range rowParts(cw) {
		typ, ok := elemType(t.DType)
		if !ok {
			w.fail(fmt.Errorf("model: %s: dtype %s", t.Name, t.DType))
			return linear{}
		}
		stored := cw.Shape[0]
		rb := len(t.Data) / stored
		if len(rows) != stored || rb*stored != len(t.Data) {
			w.fail(fmt.Errorf("model: %s: %d rows to permute, the tensor has %d", name, len(rows), stored))
			return linear{}
		}
		v := w.alloc(typ, len(t.Data)/typ.Size())
		if w.err != nil {
			return linear{}
		}
		dst := v.Buffer.Contents()[v.Offset:]
		for i, r := range rows {
			copy(dst[i*rb:(i+1)*rb], t.Data[r*rb:(r+1)*rb])
		}
		views = append(views, v)
	}
	l := linear{in: cw.Shape[len(cw.Shape)-1], out: cw.Shape[0]}
	if !cw.Quantized() {
		l.w = views[0]
		return l
	}
	l.q = ops.QuantWeight{Words: views[0], Scales: views[1], Biases: views[2], Rows: l.out, Cols: l.in, Bits: cw.Quant.Bits, GroupSize: cw.Quant.GroupSize}
	return l
}

// rows returns rows [lo, hi) of l (a single matrix) as a linear layer of
// its own: a view into the same bytes.
func (l linear) rows(lo, hi int) linear {
	sub := func(v tensor.View, perRow int) tensor.View {
		return tensor.NewView(v.Buffer, v.Offset+lo*perRow*v.Type.Size(), v.Type, (hi-lo)*perRow)
	}
	r := linear{in: l.in, out: hi - lo}
	if !l.quantized() {
		r.w = sub(l.w, l.in)
		return r
	}
	r.q = l.q
	r.q.Rows = hi - lo
	r.q.Words = sub(l.q.Words, l.in*l.q.Bits/32)
	r.q.Scales = sub(l.q.Scales, l.in/l.q.GroupSize)
	r.q.Biases = sub(l.q.Biases, l.in/l.q.GroupSize)
	return r
}

// stacked returns the experts' weights names (one matrix each) as one
// stacked tensor [E][out][in]: in place when the checkpoint holds them in
// one run (mlx-lm's switch_mlp), else copied into one.
func (w *weights) stacked(names []string) linear {
	cws := make([]*checkpoint.Weight, len(names))
	for i, n := range names {
		if cws[i] = w.get(n); cws[i] == nil {
			return linear{}
		}
	}
	parts := make([]tensor.View, len(rowParts(cws[0])))
	for j := range parts {
		ts := make([]checkpoint.Tensor, len(cws))
		for i, cw := range cws {
			ts[i] = rowParts(cw)[j]
		}
		parts[j] = w.stack(ts)
	}
	first := cws[0]
	l := linear{in: first.Shape[len(first.Shape)-1], out: first.Shape[0], experts: len(cws)}
	if !first.Quantized() {
		l.w = parts[0]
		return l
	}
	l.q = ops.QuantWeight{Words: parts[0], Scales: parts[1], Biases: parts[2], Rows: l.out, Cols: l.in,
		Bits: first.Quant.Bits, GroupSize: first.Quant.GroupSize, Experts: len(cws)}
	return l
}

// stack returns the tensors ts (one type and size) as one view: in place
// when they lie one after the other in one file, else copied.
func (w *weights) stack(ts []checkpoint.Tensor) tensor.View {
	if w.err != nil {
		return tensor.View{}
	}
	typ, ok := elemType(ts[0].DType)
	if !ok {
		w.fail(fmt.Errorf("model: %s: dtype %s", ts[0].Name, ts[0].DType))
		return tensor.View{}
	}
	size := len(ts[0].Data)
	b0, off0, inPlace := w.locate(ts[0])
	inPlace = inPlace && off0%typ.Size() == 0
	for i, t := range ts {
		if t.DType != ts[0].DType || len(t.Data) != size {
			w.fail(fmt.Errorf("model: %s: %s %v where %s has %s %v", t.Name, t.DType, t.Shape, ts[0].Name, ts[0].DType, ts[0].Shape))
			return tensor.View{}
		}
		b, off, ok := w.locate(t)
		inPlace = inPlace && ok && b == b0 && off == off0+i*size
	}
	n := len(ts) * size / typ.Size()
	if inPlace {
		return tensor.NewView(b0, off0, typ, n)
	}
	v := w.alloc(typ, n)
	if w.err == nil {
		dst := v.Buffer.Contents()[v.Offset:]
		for i, t := range ts {
			copy(dst[i*size:], t.Data)
		}
	}
	return v
}

// norm is an RMSNorm's weight and the offset added to it.
type norm struct {
	w      tensor.View
	offset float32
}

func (w *weights) norm(name string) norm {
	cw := w.get(name)
	if cw == nil {
		return norm{}
	}
	return norm{w: w.float(cw.Data), offset: float32(cw.NormOffset)}
}

// fused returns the experts' gate and up projections (dense) as one
// stacked [E][2 out][in] tensor viewed in place when the checkpoint holds
// them so (HF's fused gate_up_proj: expert e's gate rows, then its up
// rows, experts one after the other), and a zero linear otherwise.
func (w *weights) fused(gates, ups []string) linear {
	if w.err != nil {
		return linear{}
	}
	var b0 *mtl.Buffer
	var off0, size int
	for e := range gates {
		g, u := w.get(gates[e]), w.get(ups[e])
		if g == nil || u == nil || g.Quantized() || u.Quantized() || g.Data.DType != u.Data.DType || len(g.Data.Data) != len(u.Data.Data) {
			return linear{}
		}
		bg, og, okg := w.locate(g.Data)
		bu, ou, oku := w.locate(u.Data)
		if e == 0 {
			b0, off0, size = bg, og, len(g.Data.Data)
		}
		if !okg || !oku || bg != b0 || bu != b0 || og != off0+2*e*size || ou != og+size {
			return linear{}
		}
	}
	cw := w.get(gates[0])
	typ, ok := elemType(cw.Data.DType)
	if !ok || typ == tensor.U32 || off0%typ.Size() != 0 {
		return linear{}
	}
	return linear{w: tensor.NewView(b0, off0, typ, 2*len(gates)*size/typ.Size()), in: cw.Shape[len(cw.Shape)-1], out: 2 * cw.Shape[0], experts: len(gates)}
}
