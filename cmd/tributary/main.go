// Command tributary drives the in-memory partitioned event broker of package
// engine from the command line.
//
// Usage:
//
//	tributary demo [flags]   run the worked examples and a concurrent workload
//	tributary help           print usage
//
// The demo subcommand first replays the worked examples of the broker
// contract on a fresh broker, checking every result, and then runs a
// concurrent workload: several producers publish to a multi-partition topic
// while three consumer groups poll, retry and acknowledge under membership
// churn. It ends by verifying that every group acknowledged every published
// record exactly once and in partition order, and exits with status 1 when any
// check fails. Run "tributary demo -h" for its flags.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses of the program.
const (
	exitOK      = 0 // success
	exitFailed  = 1 // a demo check failed or the run timed out
	exitUsage   = 2 // bad command line
	usageHeader = "tributary — an in-memory partitioned event broker with consumer groups"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a subcommand, writing
// its normal output to stdout and diagnostics to stderr, and returns the
// process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "tributary: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
}

// usage writes the top-level help text to w.
func usage(w io.Writer) {
	fmt.Fprintf(w, `%s

Usage:
  tributary <command> [flags]

Commands:
  demo    run the contract's worked examples, then a concurrent workload of
          producers and consumer groups with retries and rebalances, and
          verify that nothing was lost, duplicated or reordered
  help    print this text

Run "tributary <command> -h" for a command's flags.
`, usageHeader)
}
