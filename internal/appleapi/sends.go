package appleapi

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/typeenc"
)

// A TableEntry is one field of a selector table (objc.NewSelectorTable) as
// the source declares it.
type TableEntry struct {
	Field, Name, Types string
	Pos                string
}

// A Send is one message send, found in the source, whose selector is a
// field of a selector table.
type Send struct {
	Field string // the table's field
	// Func is the package objc function the send goes through: Send,
	// SendWord, SendBool, SendFloat64, SendArgs, SendStruct24 or
	// SendSuper.
	Func string
	// Args are the shapes of the arguments after the selector: "word",
	// "struct16" or "struct24"; "" where the source does not say (an
	// argument list passed on with ...).
	Args []string
	// Discarded reports whether the result is unused.
	Discarded bool
	Pos       string
}

// selectorArg is the index of the selector among the arguments of each
// send function of package objc, called as a package function; as a
// method (ID.Send, Class.SendWord) the selector comes first.
var selectorArg = map[string]int{
	"Send": 1, "SendWord": 1, "SendBool": 1, "SendFloat64": 1,
	"SendArgs": 1, "SendStruct24": 1, "SendSuper": 2,
}

// queries are the functions that take a selector without sending it.
var queries = map[string]bool{"RespondsToSelector": true, "InstancesRespondToSelector": true}

func parseDir(t testing.TB, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return fset, files
}

// ReadTable returns the fields of the struct variable table declared in
// the non-test Go files of dir, with their sel and types tags.
func ReadTable(t testing.TB, dir, table string) []TableEntry {
	t.Helper()
	fset, files := parseDir(t, dir)
	var out []TableEntry
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || vs.Names[0].Name != table {
				return true
			}
			st, ok := vs.Type.(*ast.StructType)
			if !ok {
				t.Fatalf("%s: %s is not declared with a struct type", fset.Position(vs.Pos()), table)
			}
			for _, fld := range st.Fields.List {
				var tag reflect.StructTag
				if fld.Tag != nil {
					s, _ := strconv.Unquote(fld.Tag.Value)
					tag = reflect.StructTag(s)
				}
				for _, name := range fld.Names {
					out = append(out, TableEntry{name.Name, tag.Get("sel"), tag.Get("types"), fset.Position(name.Pos()).String()})
				}
			}
			return false
		})
	}
	if len(out) == 0 {
		t.Fatalf("no selector table %s in %s", table, dir)
	}
	return out
}

// FindSends returns every call in the non-test Go files of dir that passes
// a field of the selector table: the sends, through package objc's send
// functions or through wrappers, methods named by the keys of wrappers
// that forward their arguments to the objc function named by the value
// (selector first). A call that passes a table selector to any other
// function, other than a query such as RespondsToSelector, is an error:
// the check could not tell how it is sent.
func FindSends(t testing.TB, dir, table string, wrappers map[string]string) []Send {
	t.Helper()
	fset, files := parseDir(t, dir)
	var out []Send
	for _, f := range files {
		discarded := map[*ast.CallExpr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if es, ok := n.(*ast.ExprStmt); ok {
				if c, ok := es.X.(*ast.CallExpr); ok {
					discarded[c] = true
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			at := -1
			var field string
			for i, a := range call.Args {
				if s, ok := a.(*ast.SelectorExpr); ok {
					if x, ok := s.X.(*ast.Ident); ok && x.Name == table {
						at, field = i, s.Sel.Name
						break
					}
				}
			}
			if at < 0 {
				return true
			}
			pos := fset.Position(call.Pos()).String()
			name, method := callee(call)
			fn, idx := name, -1
			if w, ok := wrappers[name]; ok && method {
				fn, idx = w, 0
			} else if i, ok := selectorArg[name]; ok {
				idx = i
				if method && (name == "Send" || name == "SendWord") {
					idx = 0
				}
			}
			if idx != at {
				if !queries[name] {
					t.Errorf("%s: %s.%s is passed to %s as argument %d; the check knows only objc's send functions and %v", pos, table, field, name, at, wrappers)
				}
				return true
			}
			s := Send{Field: field, Func: fn, Discarded: discarded[call], Pos: pos}
			for _, a := range call.Args[at+1:] {
				s.Args = append(s.Args, argShape(fn, a))
				if convertsPointer(a) {
					t.Errorf("%s: argument of %s.%s converts a pointer with unsafe.Pointer; pass Go pointers through objc.Pointer, which moves the memory off the goroutine's stack", fset.Position(a.Pos()), table, field)
				}
			}
			if call.Ellipsis.IsValid() && len(s.Args) > 0 {
				s.Args[len(s.Args)-1] = ""
			}
			out = append(out, s)
			return true
		})
	}
	return out
}

// callee returns the name of the called function and whether it is called
// as a method (x.f() where x is not the package objc).
func callee(call *ast.CallExpr) (string, bool) {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name, false
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return f.Sel.Name, !ok || x.Name != "objc"
	}
	return "", false
}

// convertsPointer reports whether e contains unsafe.Pointer(...).
func convertsPointer(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if f, ok := c.Fun.(*ast.SelectorExpr); ok {
				if x, ok := f.X.(*ast.Ident); ok && x.Name == "unsafe" && f.Sel.Name == "Pointer" {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// argShape returns the shape of one argument: a word for the word-only
// send functions, and for SendArgs and SendStruct24 the constructor used,
// objc.Word, objc.Struct16 or objc.Struct24, or a method named after the
// constructor it returns (Size.struct24 in package mtl).
func argShape(fn string, a ast.Expr) string {
	if fn != "SendArgs" && fn != "SendStruct24" {
		return "word"
	}
	if c, ok := a.(*ast.CallExpr); ok {
		name, method := callee(c)
		if shape := strings.ToLower(name); shape == "word" || shape == "struct16" || shape == "struct24" {
			if method || name != shape {
				return shape
			}
		}
	}
	return ""
}

// resultFuncs are the send functions that read each kind of result.
var resultFuncs = map[typeenc.Kind][]string{
	typeenc.Void:     {"Send", "SendArgs", "SendSuper"},
	typeenc.Object:   {"Send", "SendSuper"},
	typeenc.Word:     {"SendWord", "SendArgs"},
	typeenc.Int8:     {"SendBool"},
	typeenc.Double:   {"SendFloat64"},
	typeenc.Struct24: {"SendStruct24"},
}

// argShapes are the shapes in which the send functions pass each kind of
// argument: integers and pointers of up to 8 bytes as words.
var argShapes = map[typeenc.Kind]string{
	typeenc.Object:   "word",
	typeenc.Word:     "word",
	typeenc.Int32:    "word",
	typeenc.Int16:    "word",
	typeenc.Int8:     "word",
	typeenc.Struct16: "struct16",
	typeenc.Struct24: "struct24",
}

// Check compares the send with the type encoding of its selector: the
// send function must read the method's kind of result (a void result must
// be discarded), and each argument must have the shape of the encoding's.
func (s Send) Check(types string) error {
	enc := typeenc.Split(types)
	if len(enc) < 3 {
		return fmt.Errorf("%s: type encoding %q is too short", s.Pos, types)
	}
	ret, args := typeenc.KindOf(enc[0]), enc[3:]
	if ret == typeenc.Void && !s.Discarded {
		return fmt.Errorf("%s: %s of %s uses the result of a void method (%q)", s.Pos, s.Func, s.Field, types)
	}
	if !contains(resultFuncs[ret], s.Func) {
		return fmt.Errorf("%s: %s is sent with %s, but its method returns %q (%q): send it with %v", s.Pos, s.Field, s.Func, enc[0], types, resultFuncs[ret])
	}
	if len(s.Args) != len(args) {
		return fmt.Errorf("%s: %s is sent with %d arguments, its method takes %d (%q)", s.Pos, s.Field, len(s.Args), len(args), types)
	}
	for i, a := range args {
		want, ok := argShapes[typeenc.KindOf(a)]
		if !ok {
			return fmt.Errorf("%s: argument %d of %s is %q, which no send function passes (%q)", s.Pos, i, s.Field, a, types)
		}
		if s.Args[i] != want {
			return fmt.Errorf("%s: argument %d of %s is sent as %q, its method takes %q, a %q (%q)", s.Pos, i, s.Field, s.Args[i], a, want, types)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// RegisteredLiterals returns the string literals passed to RegisterName in
// the non-test Go files of dir, with their positions: selectors registered
// outside a selector table.
func RegisteredLiterals(t testing.TB, dir string) map[string]string {
	t.Helper()
	fset, files := parseDir(t, dir)
	out := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if name, _ := callee(call); name != "RegisterName" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				out[s] = fset.Position(lit.Pos()).String()
			}
			return true
		})
	}
	return out
}

// CheckTable checks the selector table declared as the variable table in
// dir and the package's sends with it: every name is Apple's (or listed
// in allowed with the documentation page that defines it), every encoding
// fits one of Apple's signatures of the selector, every send matches the
// encoding, no selector is registered outside the table, and, when
// allSent, every entry is sent somewhere. It returns the entries.
func CheckTable(t *testing.T, api *API, dir, table string, wrappers map[string]string, allSent bool, allowed map[string]string) []TableEntry {
	t.Helper()
	entries := ReadTable(t, dir, table)
	byField := map[string]TableEntry{}
	for _, e := range entries {
		byField[e.Field] = e
		if e.Name == "" || e.Types == "" {
			t.Errorf("%s: %s.%s lacks its sel or types tag", e.Pos, table, e.Field)
			continue
		}
		if !api.Selectors[e.Name] {
			if page := allowed[e.Name]; page == "" {
				t.Errorf("%s: selector %q is not in %s", e.Pos, e.Name, api.SelectorsPath)
			}
		}
		sigs := api.Signatures[e.Name]
		if len(sigs) == 0 {
			// signatures.txt lacks the selectors whose metal-cpp wrapper
			// could not be matched; selectors.txt still has their names.
			t.Logf("%s: %q has no signature to check %q against", e.Pos, e.Name, e.Types)
			continue
		}
		var errs []string
		for _, s := range sigs {
			err := s.Check(e.Types)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err.Error())
		}
		if errs != nil {
			t.Errorf("%s: %s.%s: %q fits none of Apple's signatures of %q:\n\t%s", e.Pos, table, e.Field, e.Types, e.Name, strings.Join(errs, "\n\t"))
		}
	}
	sent := map[string]bool{}
	for _, s := range FindSends(t, dir, table, wrappers) {
		e, ok := byField[s.Field]
		if !ok {
			t.Errorf("%s: %s.%s is not in the table", s.Pos, table, s.Field)
			continue
		}
		sent[s.Field] = true
		if err := s.Check(e.Types); err != nil {
			t.Error(err)
		}
	}
	if allSent {
		for _, e := range entries {
			if !sent[e.Field] {
				t.Errorf("%s: %s.%s (%q) is never sent", e.Pos, table, e.Field, e.Name)
			}
		}
	}
	for s, pos := range RegisteredLiterals(t, dir) {
		t.Errorf("%s: selector %q is registered with RegisterName; add it to the selector table %s", pos, s, table)
	}
	return entries
}
