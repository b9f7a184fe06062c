package objc

import (
	"fmt"
	"reflect"
	"sync"
)

// A SelectorTable is the list of selectors a package sends: the fields of
// one struct variable, each of type SEL and tagged with the selector's name
// and the type encoding of the method it names, as the runtime spells it
// (method_getTypeEncoding: the result, @ for the receiver, : for the
// selector, then each argument):
//
//	var sel struct {
//		length    objc.SEL `sel:"length" types:"Q@:"`
//		setLabel  objc.SEL `sel:"setLabel:" types:"v@:@"`
//	}
//
//	var selectors = objc.NewSelectorTable(&sel)
//
// Each name is written once. The table registers every selector on first
// use and lists them, with their encodings, for checking against Apple's
// headers and against the send functions the package calls with them.
type SelectorTable struct {
	once      sync.Once
	selectors []Selector
	dst       []*SEL
}

// A Selector is one entry of a SelectorTable.
type Selector struct {
	// Field is the name of the struct field that holds the selector.
	Field string
	// Name is the selector, such as "setBuffer:offset:atIndex:".
	Name string
	// Types is the method's type encoding, such as "v@:@QQ".
	Types string
}

// NewSelectorTable returns the table of the struct that table points to.
// A field that is not a SEL, lacks its sel or types tag, or whose method
// the send functions cannot call on every platform (an argument kind they
// do not pass, or one the lowering of some platform refuses, such as an
// argument smaller than 8 bytes on Apple arm64's stack) is a mistake in
// the program: NewSelectorTable panics, naming it.
func NewSelectorTable(table any) *SelectorTable {
	v := reflect.ValueOf(table)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("objc: NewSelectorTable needs a pointer to a struct of SEL fields, got %T", table))
	}
	v = v.Elem()
	t := &SelectorTable{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		s := Selector{Field: f.Name, Name: f.Tag.Get("sel"), Types: f.Tag.Get("types")}
		if f.Type != reflect.TypeFor[SEL]() || s.Name == "" || s.Types == "" {
			panic(fmt.Sprintf("objc: field %s of %s is %v with tag %q; every field must be a SEL tagged with sel and types", f.Name, v.Type(), f.Type, f.Tag))
		}
		if err := checkTypes(s.Types); err != nil {
			panic(fmt.Sprintf("objc: field %s (%q) of %s: %v", f.Name, s.Name, v.Type(), err))
		}
		t.selectors = append(t.selectors, s)
		t.dst = append(t.dst, (*SEL)(v.Field(i).Addr().UnsafePointer()))
	}
	return t
}

// Register registers every selector of the table, the first time it is
// called, and stores each in its field.
func (t *SelectorTable) Register() {
	t.once.Do(func() {
		for i, s := range t.selectors {
			*t.dst[i] = RegisterName(s.Name)
		}
	})
}

// Selectors returns the entries of the table, in the order of the fields.
func (t *SelectorTable) Selectors() []Selector {
	return append([]Selector(nil), t.selectors...)
}
