package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
)

// snippets returns the ```go blocks of the markdown text md, each as its
// lines.
func snippets(md string) [][]string {
	var out [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, cur)
		case in:
			cur = append(cur, line)
		}
	}
	return out
}

// normalize trims each line and drops blank lines and comments standing
// alone, so that indentation and spacing do not matter.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// parts splits a snippet at its elisions (a line "..."), each part a run
// of lines that must appear contiguously, in order.
func parts(lines []string) [][]string {
	var out [][]string
	var cur []string
	for _, l := range normalize(lines) {
		if l == "..." {
			out = append(out, cur)
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	return append(out, cur)
}

// contains reports whether body holds every part, in order, each part's
// lines contiguous.
func contains(body []string, ps [][]string) bool {
	at := 0
	for _, p := range ps {
		if len(p) == 0 {
			continue
		}
		found := false
		for i := at; i+len(p) <= len(body); i++ {
			if equal(body[i:i+len(p)], p) {
				at, found = i+len(p), true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// examples returns the bodies of every Example function in the
// repository's test files, by name.
func examples(t *testing.T, root string) map[string][]string {
	bodies := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			rel, _ := filepath.Rel(root, path)
			bodies[rel+": "+fn.Name.Name] = normalize(strings.Split(body, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

// TestReadmeSnippetsAreExamples: every Go snippet of README.md is part of
// an Example function (its lines in order; "..." elides), which go test
// compiles and runs.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	root := testenv.RepoRoot(t)
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	snips := snippets(string(md))
	if len(snips) == 0 {
		t.Fatal("README.md has no Go snippets")
	}
	bodies := examples(t, root)
	for i, s := range snips {
		ps := parts(s)
		var in string
		for name, body := range bodies {
			if contains(body, ps) {
				in = name
				break
			}
		}
		if in == "" {
			t.Errorf("README.md's Go snippet %d is in no Example function:\n%s", i+1, strings.Join(s, "\n"))
		} else {
			t.Logf("snippet %d: %s", i+1, in)
		}
	}
}

// The matcher itself: a snippet whose lines are out of order, or with a
// changed line, is not found.
func TestContains(t *testing.T) {
	body := normalize([]string{"a := 1", "", "  b := 2", "// note", "c := a + b", "fmt.Println(c)"})
	for _, c := range []struct {
		snippet []string
		want    bool
	}{
		{[]string{"a := 1", "b := 2"}, true},
		{[]string{"a := 1", "...", "fmt.Println(c)"}, true},
		{[]string{"b := 2", "a := 1"}, false},
		{[]string{"a := 1", "c := a + b"}, false},
		{[]string{"a := 2"}, false},
	} {
		if got := contains(body, parts(c.snippet)); got != c.want {
			t.Errorf("contains(%q) = %v, want %v", c.snippet, got, c.want)
		}
	}
}
