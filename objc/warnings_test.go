package objc

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv marks the copy of the test binary that TestNoRuntimeWarnings
// runs.
const childEnv = "PUREMETAL_OBJC_CHILD"

// TestNoRuntimeWarnings runs the concurrency test and the pool-less
// NSString test in a child process and fails if the runtime wrote anything
// to its output: GNUstep reports objects autoreleased without a pool, and
// trouble with threads it does not know, there rather than failing.
func TestNoRuntimeWarnings(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		t.Skip("running as the child of TestNoRuntimeWarnings")
	}
	needFoundation(t)
	loadCLib(t) // the child's skip would otherwise hide a missing clang
	tests := []string{"TestConcurrentSends", "TestGoStringOutsidePool"}
	cmd := exec.Command(os.Args[0], "-test.run=^("+strings.Join(tests, "|")+")$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child test run: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("child test run did not pass %s:\n%s", name, out)
		}
	}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "", line == "PASS", strings.HasPrefix(line, "=== "), strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "    "):
		default:
			t.Errorf("unexpected output from the runtime: %q", line)
		}
	}
}

// TestGoStringOutsidePool reads NSStrings and NSErrors with no autorelease
// pool open; TestNoRuntimeWarnings checks the runtime did not complain.
func TestGoStringOutsidePool(t *testing.T) {
	needFoundation(t)
	for _, s := range []string{"outside", "any pool ✓"} {
		str := mustNSString(t, s)
		if got := GoString(str); got != s {
			t.Errorf("GoString = %q, want %q", got, s)
		}
		str.Release()
	}
}
