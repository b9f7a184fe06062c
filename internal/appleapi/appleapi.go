// Package appleapi reads the facts about Apple's Metal and Foundation API
// that testdata/apple-api holds (selectors.txt and signatures.txt, extracted
// from Apple's metal-cpp headers) and compares Objective-C type encodings
// with them, for puremetal's tests.
package appleapi

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/puremetal/puremetal/internal/testenv"
	"github.com/puremetal/puremetal/internal/typeenc"
)

// API is the content of testdata/apple-api.
type API struct {
	// SelectorsPath and SignaturesPath are the files read.
	SelectorsPath, SignaturesPath string
	// Selectors holds every selector metal-cpp sends.
	Selectors map[string]bool
	// Signatures maps a selector to its signatures, one per class that
	// answers it.
	Signatures map[string][]Signature
}

// A Signature is one line of signatures.txt: a selector as one metal-cpp
// class declares it, with its C++ result and parameter types (parameter
// names dropped; an array parameter T name[] becomes T[]).
type Signature struct {
	Selector, Class string
	Result          string
	Params          []string
}

// Load reads both files. A missing file, or one too short to be the full
// list, fails the test.
func Load(t testing.TB) *API {
	t.Helper()
	dir := filepath.Join(testenv.DataDir(t), "apple-api")
	api := &API{
		SelectorsPath:  filepath.Join(dir, "selectors.txt"),
		SignaturesPath: filepath.Join(dir, "signatures.txt"),
		Selectors:      map[string]bool{},
		Signatures:     map[string][]Signature{},
	}
	b, err := os.ReadFile(api.SelectorsPath)
	if err != nil {
		t.Fatalf("Apple selector list missing from the repository: %v", err)
	}
	for _, s := range strings.Fields(string(b)) {
		api.Selectors[s] = true
	}
	f, err := os.Open(api.SignaturesPath)
	if err != nil {
		t.Fatalf("Apple signature list missing from the repository: %v", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if s, ok := parseSignature(sc.Text()); ok {
			api.Signatures[s.Selector] = append(api.Signatures[s.Selector], s)
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", api.SignaturesPath, err)
	}
	if len(api.Selectors) < 1000 || n < 1000 {
		t.Fatalf("%s and %s hold %d selectors and %d signatures; expected the full lists", api.SelectorsPath, api.SignaturesPath, len(api.Selectors), n)
	}
	return api
}

// parseSignature parses "selector | class | returns type | (params)".
func parseSignature(line string) (Signature, bool) {
	parts := strings.Split(line, " | ")
	if len(parts) != 4 {
		return Signature{}, false
	}
	s := Signature{Selector: parts[0], Class: parts[1], Result: normalize(strings.TrimPrefix(parts[2], "returns "))}
	list := strings.TrimSuffix(strings.TrimPrefix(parts[3], "("), ")")
	for _, p := range splitTopLevel(list) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		// Drop the parameter's name: the type is what precedes it.
		if strings.HasSuffix(p, "]") {
			name := p[:strings.Index(p, "[")]
			k := strings.LastIndexAny(name, " *")
			p = name[:k+1] + "[]"
		} else if i := strings.LastIndexAny(p, " *"); i >= 0 {
			p = p[:i+1]
		}
		s.Params = append(s.Params, normalize(p))
	}
	return s, true
}

func normalize(cpp string) string {
	return strings.ReplaceAll(strings.TrimSpace(cpp), " *", "*")
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

// Check reports whether the Objective-C method type encoding types (result,
// @, :, then the arguments) has the signature's result and parameter
// types, or an error naming the first difference.
func (s Signature) Check(types string) error {
	enc := typeenc.Split(types)
	if len(enc) < 3 || enc[1] != "@" || enc[2] != ":" {
		return fmt.Errorf("type encoding %q does not start with a result type, \"@\" and \":\"", types)
	}
	if !TypeMatches(enc[0], s.Result) {
		return fmt.Errorf("%q returns %q in the encoding %q, %s's returns %s", s.Selector, enc[0], types, s.Class, s.Result)
	}
	args := enc[3:]
	if len(args) != len(s.Params) {
		return fmt.Errorf("%q has %d arguments in the encoding %q, %s's has %d (%v)", s.Selector, len(args), types, s.Class, len(s.Params), s.Params)
	}
	for i, a := range args {
		if !TypeMatches(a, s.Params[i]) {
			return fmt.Errorf("%q argument %d is %q in the encoding %q, %s's is %s", s.Selector, i, a, types, s.Class, s.Params[i])
		}
	}
	return nil
}

// TypeMatches reports whether an Objective-C type encoding fits a
// metal-cpp C++ type. Foundation's own headers name their types without
// the NS:: prefix (UInteger, String*).
func TypeMatches(enc, cpp string) bool {
	cpp = strings.TrimSpace(strings.TrimPrefix(cpp, "const "))
	cpp = strings.TrimPrefix(cpp, "class ")
	bare := strings.TrimPrefix(cpp, "NS::")
	switch enc {
	case "v":
		return cpp == "void"
	case "@":
		return bare == "ErrorDomain" || strings.HasSuffix(cpp, "*") && !strings.HasSuffix(cpp, "**") &&
			!strings.HasPrefix(cpp, "void") && !strings.HasPrefix(cpp, "char") && !autoreleasedOut(cpp)
	case "^v":
		return cpp == "void*"
	case "r*", "*":
		return cpp == "char*"
	case ":":
		return bare == "SEL" || cpp == "SEL"
	case "Q", "q":
		return bare == "UInteger" || bare == "Integer" || bare == "StringEncoding" || cpp == "uint64_t" ||
			(strings.HasPrefix(cpp, "MTL::") && !strings.HasSuffix(cpp, "*") && cpp != "MTL::Size")
	case "c", "B":
		return cpp == "bool" || bare == "BOOL"
	case "d":
		return cpp == "CFTimeInterval" || cpp == "double"
	case "{MTLSize=QQQ}":
		return cpp == "MTL::Size"
	case "{_NSRange=QQ}":
		return bare == "Range"
	case "^@":
		return autoreleasedOut(cpp) || strings.HasSuffix(cpp, "**") || strings.HasSuffix(cpp, "* const*") || strings.HasSuffix(cpp, "[]")
	case "^Q":
		return strings.HasPrefix(bare, "UInteger") && (strings.HasSuffix(cpp, "[]") || strings.HasSuffix(cpp, "*"))
	case "@?":
		return strings.Contains(cpp, "Deallocator") || strings.Contains(cpp, "Handler") || strings.Contains(cpp, "Block")
	}
	return false
}

// autoreleasedOut reports whether cpp is a pointer to one of metal-cpp's
// Autoreleased types (MTL::AutoreleasedComputePipelineReflection*): each is
// an object pointer, so this is an out parameter, ^@ in Objective-C.
func autoreleasedOut(cpp string) bool {
	return strings.HasPrefix(cpp, "MTL::Autoreleased") && strings.HasSuffix(cpp, "*") && !strings.HasSuffix(cpp, "**")
}
