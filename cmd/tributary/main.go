// Command tributary drives one in-process Tributary cluster by hand or by
// script (docs/cli.md): topics of a payload type
// (Integer, String, JSON) with named partitions, consumer groups with a
// switchable assignor, producers with a partition strategy, events read
// from JSON files, consumes with acks, failures, retries and dead letters,
// playback, and atomic snapshots of topics and groups as aligned tables.
//
// Usage:
//
//	tributary [flags]            prompt with line editing and history
//	                             (commands from standard input when it is not a terminal)
//	tributary run [flags] FILE   run a script, stopping at the first error
//	tributary serve [-http ADDR] [-kafka ADDR] [flags] [FILE]
//	                             the same with the cluster's monitor page served at the -http
//	                             ADDR and its topics over Kafka's wire protocol at the -kafka
//	                             ADDR (one or both), kept serving after the commands until interrupted
//	tributary demo [flags]       the example script examples/demo.tri, then the audit
//	tributary audit [flags]      a concurrent workload checked for loss, duplicates and order
//	tributary help               this text
//
// Type help at the prompt for the commands. Exit status: 0 success; 1 a
// command (or a check of the audit) failed; 2 a bad command line.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

// Exit statuses of the program.
const (
	exitOK      = 0 // success
	exitFailed  = 1 // a command or a check failed, or the run timed out
	exitUsage   = 2 // bad command line
	usageHeader = "tributary — Kafka's consumer-group semantics inside one process"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a mode, writing its
// normal output to stdout and diagnostics to stderr, and returns the
// process exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (len(args[0]) > 1 && args[0][0] == '-' && !isHelp(args[0])) {
		return runInteractive(args, stdin, stdout, stderr, isTerminal(stdin))
	}
	switch args[0] {
	case "run":
		return runRun(args[1:], stdin, stdout, stderr)
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runServe(ctx, args[1:], stdin, isTerminal(stdin), stdout, stderr)
	case "demo", "audit":
		// The first SIGINT or SIGTERM stops the audit, which then cleans
		// up and fails; a second one ends the program at once.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		context.AfterFunc(ctx, stop)
		if args[0] == "demo" {
			return runDemoScript(ctx, args[1:], stdout, stderr)
		}
		return runAudit(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "tributary: unknown command %s (try tributary help)\n", quote(args[0]))
		return exitUsage
	}
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// isTerminal reports whether r is a terminal (the prompt is then used).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// usage writes the top-level help text to w.
func usage(w io.Writer) {
	fmt.Fprintf(w, `%s

Usage:
  tributary [-keep-going] [-echo] [-capacity N] [-replay-window N] [-clock TIME]
            [-seed N] [-backend memory|jetstream] [-nats URL] [-session-timeout D]
        a prompt with line editing and history; type help for the commands
        (reads commands from standard input when it is not a terminal)
  tributary run [-keep-going] [-echo] [-capacity N] [-replay-window N] [-clock TIME]
            [-seed N] [-backend memory|jetstream] [-nats URL] [-session-timeout D] FILE
        run the commands of FILE (- for standard input); stops at the first
        error with its line number and exit status 1
  tributary serve [-http ADDR] [-kafka ADDR] [run's flags] [FILE]
        the cluster's monitor page at http://ADDR/ (JSON at /api/state), its
        topics over Kafka's wire protocol at the -kafka ADDR, or both, while
        the commands of FILE run (none: standard input, or the prompt), then
        until interrupted (Ctrl-C); the addresses are printed on standard error
  tributary demo [audit flags]
        the example script (examples/demo.tri) with a transcript, then the audit
  tributary audit [flags]
        producers and consumer groups under retries and rebalances, verified
        for loss, duplicates and order
  tributary help
        this text

Run "tributary <command> -h" for a command's flags.
`, usageHeader)
}
