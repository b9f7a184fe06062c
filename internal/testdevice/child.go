package testdevice

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// childEnv names the environment variable that marks a test binary run by
// [RunChild]; its value is the -test.run pattern the child was given.
const childEnv = "PUREMETAL_TEST_CHILD"

// InChild reports whether this process is a child that [RunChild] started
// for the test named name, which then does the child's part.
func InChild(name string) bool { return os.Getenv(childEnv) == "^"+name+"$" }

// ChildResult is what a child test process wrote and how it ended.
type ChildResult struct {
	Stdout, Stderr string
	Err            error // the exit status, nil for success
}

// RunChild runs this test binary again, in a fresh process with env added
// to the environment, running only the tests that match run (a -test.run
// pattern) minus those that match skip (a -test.skip pattern, or ""). It
// is for what one process cannot check of itself: what the Objective-C
// runtime or Metal print to stderr, and memory growth. The test name
// given to [InChild] is the exact pattern "^Name$".
func RunChild(t testing.TB, run, skip string, env ...string) ChildResult {
	t.Helper()
	args := []string{"-test.run=" + run, "-test.count=1", "-test.v"}
	if skip != "" {
		args = append(args, "-test.skip="+skip)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), childEnv+"="+run), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return ChildResult{Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
}
