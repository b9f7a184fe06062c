package appleapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSendCheck checks that each kind of mismatch between a send and its
// selector's type encoding is reported, and that matching sends pass.
func TestSendCheck(t *testing.T) {
	for _, c := range []struct {
		send  Send
		types string
		want  string // "" for no error
	}{
		{Send{Field: "f", Func: "SendFloat64"}, "d@:", ""},
		{Send{Field: "f", Func: "SendWord"}, "d@:", "returns \"d\""},
		{Send{Field: "f", Func: "Send", Discarded: true}, "v@:@", "0 arguments"},
		{Send{Field: "f", Func: "Send", Args: []string{"word"}}, "v@:@", "void method"},
		{Send{Field: "f", Func: "Send", Args: []string{"word"}, Discarded: true}, "v@:@", ""},
		{Send{Field: "f", Func: "SendBool", Args: []string{"word"}}, "c@:q", ""},
		{Send{Field: "f", Func: "Send"}, "c@:", "returns \"c\""},
		{Send{Field: "f", Func: "SendStruct24"}, "{MTLSize=QQQ}@:", ""},
		{Send{Field: "f", Func: "SendArgs", Args: []string{"struct24", "struct24"}, Discarded: true}, "v@:{MTLSize=QQQ}{MTLSize=QQQ}", ""},
		{Send{Field: "f", Func: "SendArgs", Args: []string{"struct24", "word"}, Discarded: true}, "v@:{MTLSize=QQQ}{MTLSize=QQQ}", "argument 1"},
		{Send{Field: "f", Func: "Send", Args: []string{"word", "word"}, Discarded: true}, "v@:^@{_NSRange=QQ}", "argument 1"},
		{Send{Field: "f", Func: "SendArgs", Args: []string{"word"}, Discarded: true}, "v@:f", "no send function passes"},
	} {
		err := c.send.Check(c.types)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v with %q: %v", c.send, c.types, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v with %q: error %v, want one mentioning %q", c.send, c.types, err, c.want)
		}
	}
}

// TestTypeMatches checks the correspondence of encodings and metal-cpp
// types on the shapes the binding uses.
func TestTypeMatches(t *testing.T) {
	for _, c := range []struct {
		enc, cpp string
		want     bool
	}{
		{"{MTLSize=QQQ}", "MTL::Size", true},
		{"Q", "MTL::Size", false},
		{"{_NSRange=QQ}", "NS::Range", true},
		{"d", "CFTimeInterval", true},
		{"Q", "CFTimeInterval", false},
		{"c", "bool", true},
		{"@", "NS::String*", true},
		{"@", "void*", false},
		{"^v", "void*", true},
		{"r*", "const char*", true},
		{"Q", "UInteger", true},
		{"^@", "const MTL::Buffer* const[]", true},
		{"^@", "const MTL::AutoreleasedComputePipelineReflection*", true},
		{"@", "const MTL::AutoreleasedComputePipelineReflection*", false},
	} {
		if got := TypeMatches(c.enc, c.cpp); got != c.want {
			t.Errorf("TypeMatches(%q, %q) = %v, want %v", c.enc, c.cpp, got, c.want)
		}
	}
}

// TestFindSends reads the sends of a small package: each send function
// and form, the argument shapes (a constructor of package objc, or a
// method named after the one it returns), the wrapper, and a query that is
// not a send.
func TestFindSends(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import "github.com/puremetal/puremetal/objc"

var sel struct {
	a objc.SEL ` + "`sel:\"a\" types:\"@@:\"`" + `
	b objc.SEL ` + "`sel:\"b:\" types:\"v@:{MTLSize=QQQ}\"`" + `
	c objc.SEL ` + "`sel:\"c:\" types:\"Q@:Q\"`" + `
}

type enc struct{ id objc.ID }

func (e enc) send(s objc.SEL, args ...uintptr) { objc.Send(e.id, s, args...) }

type size struct{ w, h, d uintptr }

func (s size) struct24() objc.Arg { return objc.Struct24(s.w, s.h, s.d) }

func f(id objc.ID, e enc) uintptr {
	x := id.Send(sel.a)
	objc.SendArgs(x, sel.b, objc.Struct24(1, 2, 3))
	objc.SendArgs(x, sel.b, size{1, 2, 3}.struct24())
	e.send(sel.c, 4)
	if id.RespondsToSelector(sel.c) {
		return objc.SendWord(id, sel.c, 5)
	}
	return 0
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o666); err != nil {
		t.Fatal(err)
	}
	entries := ReadTable(t, dir, "sel")
	if len(entries) != 3 || entries[1].Name != "b:" || entries[1].Types != "v@:{MTLSize=QQQ}" {
		t.Fatalf("ReadTable = %+v", entries)
	}
	var got []string
	for _, s := range FindSends(t, dir, "sel", map[string]string{"send": "Send"}) {
		got = append(got, s.Func+" "+s.Field+" "+strings.Join(s.Args, ",")+map[bool]string{true: " discarded"}[s.Discarded])
		// The wrapper sends c, whose result is an integer, with Send:
		// that one send is wrong.
		err := s.Check(map[string]string{"a": "@@:", "b": "v@:{MTLSize=QQQ}", "c": "Q@:Q"}[s.Field])
		if wrong := s.Func == "Send" && s.Field == "c"; wrong != (err != nil) {
			t.Errorf("%+v: Check returned %v", s, err)
		}
	}
	want := []string{"Send a ", "SendArgs b struct24 discarded", "SendArgs b struct24 discarded", "Send c word discarded", "SendWord c word"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("FindSends = %q, want %q", got, want)
	}
}
