// Package readme holds the test that keeps the README's Go snippets true:
// each one is part of a compiled, runnable Example function of the
// repository, so a snippet that no longer compiles fails the build of its
// example, and a snippet with no example fails the test.
package readme
