package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/f91dcac0/tributary/examples"
)

// demoScript is the example script `tributary demo` runs, from examples.FS.
const demoScript = "demo.tri"

// runDemoScript is `tributary demo [audit flags]`: the example script
// examples/demo.tri with a transcript (its event files read from the
// embedded copy, so it runs from any directory), then the audit with the
// flags given, which ctx ends as it ends runAudit. The flags are checked
// before the script runs.
func runDemoScript(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if _, err := parseAuditFlags(args, io.Discard); err != nil {
		return runAudit(ctx, args, stdout, stderr) // reports the bad flag (or -h), exit 2
	}
	script, err := examples.FS.ReadFile(demoScript)
	if err != nil {
		fmt.Fprintf(stderr, "tributary demo: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "== examples/%s ==\n", demoScript)
	f := sessionFlags{echo: true, capacity: 1000, window: 1000, now: time.Now}
	if code := runScript(f, bytes.NewReader(script), "examples/"+demoScript, examples.FS.ReadFile, stdout, stderr); code != exitOK {
		return code
	}
	fmt.Fprintln(stdout)
	return runAudit(ctx, args, stdout, stderr)
}
