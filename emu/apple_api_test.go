package emu_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	"github.com/puremetal/puremetal/internal/appleapi"
)

// protocols maps each emulated class (its field in classes.go) to the
// metal-cpp classes whose selectors it may answer.
var protocols = map[string][]string{
	"device":             {"MTL::Device"},
	"buffer":             {"MTL::Buffer", "MTL::Resource"},
	"library":            {"MTL::Library"},
	"function":           {"MTL::Function"},
	"pipeline":           {"MTL::ComputePipelineState"},
	"queue":              {"MTL::CommandQueue"},
	"commandBuffer":      {"MTL::CommandBuffer"},
	"encoder":            {"MTL::ComputeCommandEncoder", "MTL::CommandEncoder"},
	"blitEncoder":        {"MTL::BlitCommandEncoder", "MTL::CommandEncoder"},
	"options":            {"MTL::CompileOptions"},
	"constantValues":     {"MTL::FunctionConstantValues"},
	"sharedEvent":        {"MTL::SharedEvent", "MTL::Event"},
	"listener":           {"MTL::SharedEventListener"},
	"binaryArchive":      {"MTL::BinaryArchive"},
	"archiveDescriptor":  {"MTL::BinaryArchiveDescriptor"},
	"pipelineDescriptor": {"MTL::ComputePipelineDescriptor"},
	"captureManager":     {"MTL::CaptureManager"},
	"captureDescriptor":  {"MTL::CaptureDescriptor"},
	"captureScope":       {"MTL::CaptureScope"},
}

// notInMetalCpp lists the selectors the emulated objects send that Apple's
// metal-cpp headers do not wrap, each with the Apple documentation page
// that defines it.
var notInMetalCpp = map[string]string{
	// GNUstep's NSURL has no fileSystemRepresentation; its path is
	// Foundation's too.
	"path": "https://developer.apple.com/documentation/foundation/nsurl/path",
}

// nsObjectMethods are NSObject's, overridden by the emulated classes.
var nsObjectMethods = map[string]bool{"dealloc": true, "init": true}

// TestMethodsMatchApplesSignatures checks every method the emulated
// classes implement against Apple's metal-cpp signatures: the selector is
// one that the class's protocol has, and the Objective-C type encoding
// given to the runtime has Apple's return type and parameter types. The
// emulated device is written by us, so this is what keeps it faithful.
func TestMethodsMatchApplesSignatures(t *testing.T) {
	api := appleapi.Load(t)
	methods := emulatedMethods(t)
	if len(methods) < 40 {
		t.Fatalf("found %d methods in classes.go; the scan is broken", len(methods))
	}
	for _, m := range methods {
		if nsObjectMethods[m.sel] {
			continue
		}
		var found *appleapi.Signature
		for _, s := range api.Signatures[m.sel] {
			if slices.Contains(protocols[m.class], s.Class) {
				found = &s
				break
			}
		}
		if found == nil {
			// signatures.txt lacks the selectors whose metal-cpp wrapper
			// could not be matched; selectors.txt still has their names.
			if api.Selectors[m.sel] {
				t.Logf("%s: %q is Apple's, but has no signature to check its types against", m.pos, m.sel)
				continue
			}
			t.Errorf("%s: %s answers %q, which %v does not have in %s", m.pos, m.class, m.sel, protocols[m.class], api.SignaturesPath)
			continue
		}
		if err := found.Check(m.types); err != nil {
			t.Errorf("%s: %v", m.pos, err)
		}
	}
}

// TestSelectorsAreApples checks the selectors the emulated objects send to
// Foundation objects and compile options, and those their methods compare
// with, against Apple's headers, and each send against its encoding.
func TestSelectorsAreApples(t *testing.T) {
	api := appleapi.Load(t)
	if n := len(appleapi.CheckTable(t, api, ".", "fsel", nil, false, notInMetalCpp)); n < 5 {
		t.Fatalf("found %d selectors in fsel; the scan is broken", n)
	}
}

type method struct{ class, sel, types, pos string }

// emulatedMethods reads classes.go: each reg(&classes.X, name, m(sel,
// types, fn)...) call gives class X's methods, each
// objc.AddClassMethods(classes.X, []objc.Method{m(...)}) its class
// methods.
func emulatedMethods(t *testing.T) []method {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "classes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	shared := map[string]*ast.CallExpr{} // dealloc, setLabel, label := m(...)
	var out []method
	ast.Inspect(file, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
			call, okCall := as.Rhs[0].(*ast.CallExpr)
			id, okID := as.Lhs[0].(*ast.Ident)
			if okCall && okID {
				shared[id.Name] = call
			}
		}
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		// objc.AddClassMethods(classes.X, []objc.Method{m(...), ...}):
		// class methods of X.
		if fn, ok := call.Fun.(*ast.SelectorExpr); ok && fn.Sel.Name == "AddClassMethods" {
			field, okField := call.Args[0].(*ast.SelectorExpr)
			list, okList := call.Args[1].(*ast.CompositeLit)
			if !okField || !okList {
				t.Errorf("%s: cannot read the class methods", fset.Position(call.Pos()))
				return true
			}
			for _, a := range list.Elts {
				c, ok := a.(*ast.CallExpr)
				if !ok || len(c.Args) < 2 {
					t.Errorf("%s: cannot read a class method of %s", fset.Position(a.Pos()), field.Sel.Name)
					continue
				}
				sel, _ := strconv.Unquote(c.Args[0].(*ast.BasicLit).Value)
				types, _ := strconv.Unquote(c.Args[1].(*ast.BasicLit).Value)
				out = append(out, method{field.Sel.Name, sel, types, fset.Position(c.Pos()).String()})
			}
			return true
		}
		if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "reg" {
			return true
		}
		ref, ok := call.Args[0].(*ast.UnaryExpr)
		if !ok {
			return true
		}
		field, ok := ref.X.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		class := field.Sel.Name
		for _, a := range call.Args[2:] {
			c, ok := a.(*ast.CallExpr)
			if !ok {
				if id, ok := a.(*ast.Ident); ok {
					c = shared[id.Name]
				}
			}
			if c == nil || len(c.Args) < 2 {
				t.Errorf("%s: cannot read a method of %s", fset.Position(a.Pos()), class)
				continue
			}
			sel, _ := strconv.Unquote(c.Args[0].(*ast.BasicLit).Value)
			types, _ := strconv.Unquote(c.Args[1].(*ast.BasicLit).Value)
			out = append(out, method{class, sel, types, fset.Position(c.Pos()).String()})
		}
		return true
	})
	return out
}
