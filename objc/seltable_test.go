package objc

import (
	"fmt"
	"strings"
	"testing"
)

// TestSelectorTable checks that a table registers each field's selector
// under its tagged name, and lists the entries in field order.
func TestSelectorTable(t *testing.T) {
	needRuntime(t)
	var s struct {
		first  SEL `sel:"pmFirst" types:"v@:"`
		second SEL `sel:"pmSecond:with:" types:"Q@:Q{_NSRange=QQ}"`
	}
	table := NewSelectorTable(&s)
	want := []Selector{{"first", "pmFirst", "v@:"}, {"second", "pmSecond:with:", "Q@:Q{_NSRange=QQ}"}}
	if got := table.Selectors(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Selectors() = %v, want %v", got, want)
	}
	if s.first != 0 || s.second != 0 {
		t.Fatalf("selectors set before Register: %#x %#x", s.first, s.second)
	}
	table.Register()
	if s.first != RegisterName("pmFirst") || s.second != RegisterName("pmSecond:with:") || s.first == s.second {
		t.Errorf("Register stored %#x and %#x, want the selectors pmFirst and pmSecond:with:", s.first, s.second)
	}
}

// TestSelectorTableRefuses checks that a malformed table, or one with a
// method the send functions cannot call on every platform, is refused at
// once, naming the field and what is wrong.
func TestSelectorTableRefuses(t *testing.T) {
	var notPointer struct {
		a SEL `sel:"a" types:"v@:"`
	}
	var noTypes struct {
		a SEL `sel:"a"`
	}
	var noName struct {
		a SEL `types:"v@:"`
	}
	var notSEL struct {
		a uintptr `sel:"a" types:"v@:"`
	}
	// Six words fill x2 to x7: the BOOL goes on the stack, where Apple
	// arm64 packs it into one byte.
	var boolOnStack struct {
		a SEL `sel:"a:b:c:d:e:f:flag:" types:"v@:QQQQQQc"`
	}
	var floatArg struct {
		a SEL `sel:"scale:" types:"v@:f"`
	}
	var badResult struct {
		a SEL `sel:"range" types:"{_NSRange=QQ}@:"`
	}
	// These are lowered right and accepted: the BOOL in a register, a
	// word on the stack, an MTLSize result.
	NewSelectorTable(&struct {
		a SEL `sel:"a:b:c:d:e:f:g:" types:"v@:cQQQQQQ"`
		b SEL `sel:"a:b:c:d:e:f:g:" types:"v@:QQQQQQQ"`
		c SEL `sel:"size" types:"{MTLSize=QQQ}@:"`
	}{})
	for _, c := range []struct {
		table any
		want  string
	}{
		{notPointer, "pointer to a struct"},
		{&noTypes, "field a"},
		{&noName, "field a"},
		{&notSEL, "field a"},
		{&boolOnStack, `argument 6 ("c", 1 bytes) goes on the stack on Apple arm64`},
		{&floatArg, `argument 0 ("f") is float`},
		{&badResult, "which no send function reads"},
	} {
		err := refusal(func() { NewSelectorTable(c.table) })
		if err == "" || !strings.Contains(err, c.want) {
			t.Errorf("NewSelectorTable(%T): panic %q, want one mentioning %q", c.table, err, c.want)
		}
	}
}

// refusal runs f and returns what it panicked with, or "".
func refusal(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
