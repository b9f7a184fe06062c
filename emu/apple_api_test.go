package emu_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
)

// protocols maps each emulated class (its field in classes.go) to the
// metal-cpp classes whose selectors it may answer.
var protocols = map[string][]string{
	"device":        {"MTL::Device"},
	"buffer":        {"MTL::Buffer", "MTL::Resource"},
	"library":       {"MTL::Library"},
	"function":      {"MTL::Function"},
	"pipeline":      {"MTL::ComputePipelineState"},
	"queue":         {"MTL::CommandQueue"},
	"commandBuffer": {"MTL::CommandBuffer"},
	"encoder":       {"MTL::ComputeCommandEncoder", "MTL::CommandEncoder"},
	"options":       {"MTL::CompileOptions"},
}

// nsObjectMethods are NSObject's, overridden by the emulated classes.
var nsObjectMethods = map[string]bool{"dealloc": true, "init": true}

type signature struct {
	ret    string
	params []string
}

// TestMethodsMatchApplesSignatures checks every method the emulated
// classes implement against Apple's metal-cpp signatures: the selector is
// one that the class's protocol has, and the Objective-C type encoding
// given to the runtime has Apple's return type and parameter types. The
// emulated device is written by us, so this is what keeps it faithful.
func TestMethodsMatchApplesSignatures(t *testing.T) {
	path := filepath.Join(testenv.SharedDir(t), "apple-api", "signatures.txt")
	sigs := readSignatures(t, path)
	known := readSelectors(t, filepath.Join(filepath.Dir(path), "selectors.txt"))
	methods := emulatedMethods(t)
	if len(methods) < 40 {
		t.Fatalf("found %d methods in classes.go; the scan is broken", len(methods))
	}
	for _, m := range methods {
		if nsObjectMethods[m.sel] {
			continue
		}
		var found *signature
		for _, cls := range protocols[m.class] {
			if s, ok := sigs[m.sel+" "+cls]; ok {
				found = &s
				break
			}
		}
		if found == nil {
			// signatures.txt lacks the selectors whose metal-cpp wrapper
			// could not be matched; selectors.txt still has their names.
			if known[m.sel] {
				t.Logf("%s: %q is Apple's, but has no signature to check its types against", m.pos, m.sel)
				continue
			}
			t.Errorf("%s: %s answers %q, which %v does not have in %s", m.pos, m.class, m.sel, protocols[m.class], path)
			continue
		}
		enc := splitEncoding(m.types)
		if len(enc) < 3 || enc[1] != "@" || enc[2] != ":" {
			t.Errorf("%s: %q: type encoding %q does not start with a return type, @ and :", m.pos, m.sel, m.types)
			continue
		}
		if !typeMatches(enc[0], found.ret) {
			t.Errorf("%s: %q returns %q in the encoding, Apple's returns %s", m.pos, m.sel, enc[0], found.ret)
		}
		args := enc[3:]
		if len(args) != len(found.params) {
			t.Errorf("%s: %q has %d arguments in the encoding, Apple's has %d (%v)", m.pos, m.sel, len(args), len(found.params), found.params)
			continue
		}
		for i, a := range args {
			if !typeMatches(a, found.params[i]) {
				t.Errorf("%s: %q argument %d is %q in the encoding, Apple's is %s", m.pos, m.sel, i, a, found.params[i])
			}
		}
	}
}

// typeMatches reports whether an Objective-C type encoding fits a
// metal-cpp C++ type.
func typeMatches(enc, cpp string) bool {
	cpp = strings.TrimSpace(strings.TrimPrefix(cpp, "const "))
	switch enc {
	case "v":
		return cpp == "void"
	case "@":
		return strings.HasSuffix(cpp, "*") && !strings.HasPrefix(cpp, "void")
	case "^v":
		return cpp == "void*"
	case "Q", "q":
		return cpp == "NS::UInteger" || cpp == "NS::Integer" || cpp == "uint64_t" ||
			(strings.HasPrefix(cpp, "MTL::") && !strings.HasSuffix(cpp, "*") && cpp != "MTL::Size")
	case "c":
		return cpp == "bool"
	case "d":
		return cpp == "CFTimeInterval" || cpp == "double"
	case "{MTLSize=QQQ}":
		return cpp == "MTL::Size"
	case "{_NSRange=QQ}":
		return cpp == "NS::Range"
	case "^@":
		return strings.HasSuffix(cpp, "**") || strings.HasSuffix(cpp, "[]")
	case "^Q":
		return strings.HasPrefix(cpp, "NS::UInteger") && (strings.HasSuffix(cpp, "[]") || strings.HasSuffix(cpp, "*"))
	case "@?":
		return strings.Contains(cpp, "Deallocator") || strings.Contains(cpp, "Handler") || strings.Contains(cpp, "Block")
	}
	return false
}

// splitEncoding splits an Objective-C method type encoding into its types.
func splitEncoding(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == '^' {
			j++
		}
		switch {
		case j < len(s) && s[j] == '{':
			depth := 0
			for ; j < len(s); j++ {
				if s[j] == '{' {
					depth++
				} else if s[j] == '}' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			j++
		case j+1 < len(s) && s[j] == '@' && s[j+1] == '?':
			j += 2
		default:
			j++
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func readSignatures(t *testing.T, path string) map[string]signature {
	f, err := os.Open(path)
	if err != nil {
		testenv.SkipOrFail(t, "Apple signature list missing: "+err.Error())
	}
	defer f.Close()
	sigs := map[string]signature{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), " | ")
		if len(parts) != 4 {
			continue
		}
		ret := strings.TrimPrefix(parts[2], "returns ")
		list := strings.TrimSuffix(strings.TrimPrefix(parts[3], "("), ")")
		var params []string
		for _, p := range splitTopLevel(list) {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			// Drop the parameter's name: the type is what precedes it.
			if i := strings.LastIndexAny(p, " *"); i >= 0 && !strings.HasSuffix(p, "]") {
				p = strings.TrimSpace(p[:i+1])
			} else if strings.HasSuffix(p, "]") {
				name := p[:strings.Index(p, "[")]
				k := strings.LastIndexAny(name, " *")
				p = strings.TrimSpace(name[:k+1]) + "[]"
			}
			params = append(params, strings.ReplaceAll(p, " *", "*"))
		}
		sigs[parts[0]+" "+parts[1]] = signature{ret: strings.ReplaceAll(ret, " *", "*"), params: params}
	}
	return sigs
}

func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '<', '[':
			depth++
		case ')', '>', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

type method struct{ class, sel, types, pos string }

// emulatedMethods reads classes.go: each reg(&classes.X, name, m(sel,
// types, fn)...) call gives class X's methods.
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

func readSelectors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		testenv.SkipOrFail(t, "Apple selector list missing: "+err.Error())
	}
	known := map[string]bool{}
	for _, s := range strings.Fields(string(b)) {
		known[s] = true
	}
	return known
}
