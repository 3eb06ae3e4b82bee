package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txtar (then review the diff)")

// TestMain makes this test binary also the tributary program for the
// scripts (testscript runs it as "tributary"), and checks that no test
// leaks a goroutine.
func TestMain(m *testing.M) {
	testscript.Main(leakCheck{m}, map[string]func(){
		"tributary": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// leakCheck runs the tests, then fails the run if goroutines leaked.
type leakCheck struct{ m *testing.M }

func (l leakCheck) Run() int {
	code := l.m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// TestScripts runs the golden scripts of testdata/script: each runs the
// program on a script of commands and compares its output, error lines
// and exit status with the expected ones. go test -run TestScripts -update
// rewrites the expected output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script", UpdateScripts: *update})
}
