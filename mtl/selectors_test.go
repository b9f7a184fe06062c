package mtl_test

import (
	"bufio"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/mtl"
	"github.com/puremetal/puremetal/objc"
)

// notInMetalCpp lists selectors the binding may send that Apple's metal-cpp
// headers do not wrap, each with the Apple documentation page that defines
// it. It is empty: every selector objc and mtl send today is in
// selectors.txt. Add an entry only with its page, for example
//
//	"new": "https://developer.apple.com/documentation/objectivec/nsobject/1571948-new",
var notInMetalCpp = map[string]string{}

// TestSelectorsAreApples checks every selector that objc and mtl send
// against the selectors of Apple's headers: a misspelt selector raises an
// exception on a Mac, and the emulated device, written from the same
// names, would not notice it.
func TestSelectorsAreApples(t *testing.T) {
	path := filepath.Join(testenv.SharedDir(t), "apple-api", "selectors.txt")
	f, err := os.Open(path)
	if err != nil {
		testenv.SkipOrFail(t, "Apple selector list missing: "+err.Error())
	}
	defer f.Close()
	apple := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			apple[s] = true
		}
	}
	if len(apple) < 1000 {
		t.Fatalf("%s has only %d selectors; expected the full list", path, len(apple))
	}
	sent := map[string]string{}
	for _, s := range mtl.SelectorNames() {
		sent[s] = "mtl.SelectorNames"
	}
	for _, s := range objc.SelectorNames() {
		sent[s] = "objc.SelectorNames"
	}
	root := testenv.RepoRoot(t)
	for _, dir := range []string{"objc", "mtl"} {
		for s, where := range registeredLiterals(t, filepath.Join(root, dir)) {
			sent[s] = where
		}
	}
	if len(sent) < 40 {
		t.Fatalf("found only %d selectors sent; the scan is broken", len(sent))
	}
	for s, where := range sent {
		if apple[s] {
			continue
		}
		if page, ok := notInMetalCpp[s]; ok && page != "" {
			continue
		}
		t.Errorf("selector %q (%s) is not in %s", s, where, path)
	}
}

// registeredLiterals returns the string literals passed to RegisterName in
// the non-test Go files of dir, with their positions.
func registeredLiterals(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			var fn string
			switch f := call.Fun.(type) {
			case *ast.Ident:
				fn = f.Name
			case *ast.SelectorExpr:
				fn = f.Sel.Name
			}
			if fn != "RegisterName" {
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

func TestNoDeviceOffMac(t *testing.T) {
	d, err := mtl.CreateSystemDefaultDevice()
	if err == nil {
		d.Release()
		t.Skip("a Metal device exists here")
	}
	if !strings.Contains(err.Error(), "emu") {
		t.Errorf("error %q does not say where the emulated device is", err)
	}
	if !errors.Is(err, mtl.ErrNoDevice) {
		t.Errorf("error %q does not wrap mtl.ErrNoDevice", err)
	}
}
