package mtl

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"

	"github.com/puremetal/puremetal/half"
	"github.com/puremetal/puremetal/objc"
)

// FunctionConstantValues are values for a function's function constants
// (MTLFunctionConstantValues), given by index or by name. Metal looks a
// constant's value up by index first, then by name, and ignores values for
// constants the function does not have.
type FunctionConstantValues struct {
	values []constantValue
}

type constantValue struct {
	index uint
	name  string // "" for a value by index
	typ   DataType
	bytes []byte
}

// SetAtIndex sets the value of the constant [[function_constant(index)]]
// (setConstantValue:type:atIndex:). value is a bool, int8, uint8, int16,
// uint16, int32, uint32, int64, uint64, float32, [half.Float16] or [half.BFloat16]; its Go type
// gives the MTLDataType.
func (v *FunctionConstantValues) SetAtIndex(index uint, value any) error {
	return v.set(constantValue{index: index}, value)
}

// SetWithName sets the value of the constant named name
// (setConstantValue:type:withName:); value is as for SetAtIndex.
func (v *FunctionConstantValues) SetWithName(name string, value any) error {
	if name == "" {
		return invalidf("FunctionConstantValues.SetWithName: the function constant name is empty")
	}
	return v.set(constantValue{name: name}, value)
}

func (v *FunctionConstantValues) set(c constantValue, value any) error {
	b := make([]byte, 0, 8)
	switch x := value.(type) {
	case bool:
		c.typ = DataTypeBool
		b = append(b, 0)
		if x {
			b[0] = 1
		}
	case int8:
		c.typ, b = DataTypeChar, append(b, byte(x))
	case uint8:
		c.typ, b = DataTypeUChar, append(b, x)
	case int16:
		c.typ, b = DataTypeShort, binary.LittleEndian.AppendUint16(b, uint16(x))
	case uint16:
		c.typ, b = DataTypeUShort, binary.LittleEndian.AppendUint16(b, x)
	case int32:
		c.typ, b = DataTypeInt, binary.LittleEndian.AppendUint32(b, uint32(x))
	case uint32:
		c.typ, b = DataTypeUInt, binary.LittleEndian.AppendUint32(b, x)
	case int64:
		c.typ, b = DataTypeLong, binary.LittleEndian.AppendUint64(b, uint64(x))
	case uint64:
		c.typ, b = DataTypeULong, binary.LittleEndian.AppendUint64(b, x)
	case float32:
		c.typ, b = DataTypeFloat, binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	case half.Float16:
		c.typ, b = DataTypeHalf, binary.LittleEndian.AppendUint16(b, uint16(x))
	case half.BFloat16:
		c.typ, b = DataTypeBFloat, binary.LittleEndian.AppendUint16(b, uint16(x))
	default:
		return invalidf("FunctionConstantValues: a function constant value of Go type %T has no MTLDataType here (use bool, int8 to int64, uint8 to uint64, float32, half.Float16 or half.BFloat16)", value)
	}
	c.bytes = b
	v.values = append(v.values, c)
	return nil
}

// newObject makes the MTLFunctionConstantValues object (owned by the
// caller; call inside a pool).
func (v *FunctionConstantValues) newObject() (objc.ID, error) {
	cls := objc.GetClass("MTLFunctionConstantValues")
	if cls == 0 {
		return 0, fmt.Errorf("mtl: the runtime has no MTLFunctionConstantValues class")
	}
	obj := cls.New()
	if obj == 0 {
		return 0, fmt.Errorf("mtl: [MTLFunctionConstantValues new] returned nil")
	}
	for _, c := range v.values {
		p := objc.Pointer(&c.bytes[0])
		if c.name == "" {
			obj.Send(sel.setConstantValueTypeAtIndex, p, uintptr(c.typ), uintptr(c.index))
			runtime.KeepAlive(c.bytes)
			continue
		}
		name, err := objc.NewNSString(c.name)
		if err != nil {
			obj.Release()
			return 0, fmt.Errorf("mtl: function constant name: %w", err)
		}
		obj.Send(sel.setConstantValueTypeWithName, p, uintptr(c.typ), uintptr(name))
		runtime.KeepAlive(c.bytes)
		name.Release()
	}
	return obj, nil
}

// NewFunctionWithConstants returns the library's function named name
// specialized with the given function constant values
// (newFunctionWithName:constantValues:error:). A missing value for a
// constant the function requires, or one of the wrong type, is an error
// holding the compiler's message.
func (l *Library) NewFunctionWithConstants(name string, values *FunctionConstantValues) (*Function, error) {
	if err := l.usable("Library.NewFunctionWithConstants"); err != nil {
		return nil, err
	}
	if values == nil {
		values = &FunctionConstantValues{}
	}
	s, err := objc.NewNSString(name)
	if err != nil {
		return nil, fmt.Errorf("mtl: function name: %w", err)
	}
	defer s.Release()
	var id objc.ID
	inPool(func() {
		// Making and filling the values object may autorelease too.
		var cv objc.ID
		cv, err = values.newObject()
		if err != nil {
			return
		}
		defer cv.Release()
		nserr := new(objc.ID)
		id = l.ID().Send(sel.newFunctionWithNameConstantValuesError, uintptr(s), uintptr(cv), objc.Pointer(nserr))
		if id == 0 {
			err = fmt.Errorf("mtl: specializing function %q: %s", name, errorText(*nserr, "newFunctionWithName:constantValues:error: returned nil"))
		}
	})
	if err != nil {
		return nil, err
	}
	f := &Function{name: name, dev: l.dev}
	f.set(id)
	return f, nil
}

// newMacroDictionary makes the NSDictionary of NSString names to NSString
// values for setPreprocessorMacros: (autoreleased: call inside a pool).
func newMacroDictionary(macros map[string]string) (objc.ID, error) {
	keys := make([]objc.ID, 0, len(macros))
	vals := make([]objc.ID, 0, len(macros))
	defer func() {
		for _, k := range keys {
			k.Release()
		}
		for _, v := range vals {
			v.Release()
		}
	}()
	for k, v := range macros {
		ks, err := objc.NewNSString(k)
		if err != nil {
			return 0, fmt.Errorf("mtl: preprocessor macro name %q: %w", k, err)
		}
		keys = append(keys, ks)
		vs, err := objc.NewNSString(v)
		if err != nil {
			return 0, fmt.Errorf("mtl: value of preprocessor macro %s: %w", k, err)
		}
		vals = append(vals, vs)
	}
	var kp, vp uintptr
	if len(keys) > 0 {
		kp, vp = objc.Pointer(&keys[0]), objc.Pointer(&vals[0])
	}
	d := objc.GetClass("NSDictionary").Send(sel.dictionaryWithObjectsForKeysCount, vp, kp, uintptr(len(keys)))
	runtime.KeepAlive(keys)
	runtime.KeepAlive(vals)
	if d == 0 {
		return 0, fmt.Errorf("mtl: [NSDictionary dictionaryWithObjects:forKeys:count:] returned nil")
	}
	return d, nil
}
