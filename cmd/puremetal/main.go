// Command puremetal runs language models on Apple Silicon GPUs through
// Metal, and prepares their input.
//
// Usage:
//
//	puremetal <command> [flags]
//
// The commands are:
//
//	tokenize   text to token ids and back, chat prompts to ids
//	generate   generate text with a model on the GPU
//	serve      serve a model over HTTP with OpenAI's API
//	help       this text, or a command's flags: puremetal help <command>
//
// A command's flags are listed by puremetal <command> -h. Exit status is 0
// on success, 1 when the command fails, 2 for bad usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// A command is one subcommand of puremetal.
type command struct {
	name    string
	summary string
	// run runs the command on its arguments (those after its name). An
	// error that wraps errUsage (or flag.ErrHelp) exits with status 2.
	run func(args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands = []command{
	{"tokenize", "text to token ids and back, chat prompts to ids", runTokenize},
	{"generate", "generate text with a model on the GPU", runGenerate},
	{"serve", "serve a model over HTTP with OpenAI's API", runServe},
}

// errUsage marks a command line that is wrong, as opposed to a command
// that failed.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		if len(rest) == 0 {
			usage(stdout)
			return 0
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(rest, stdin, stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "puremetal %s: %v\n", name, err)
			return 2
		}
		fmt.Fprintf(stderr, "puremetal %s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "puremetal: unknown command %q\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: puremetal <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun puremetal help <command> for a command's flags.")
}

// newFlagSet returns a flag set for a command that reports errors to the
// caller and prints its usage on stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: puremetal %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, marking a bad command line as errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}
