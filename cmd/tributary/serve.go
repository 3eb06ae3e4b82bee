package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/f91dcac0/tributary/monitor"
)

// serveUsage is the usage line of `tributary serve`.
func serveUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: tributary serve -http ADDR [-keep-going] [-echo] [-capacity N] [-replay-window N] [-clock TIME]")
	fmt.Fprintln(w, "                       [-seed N] [-backend memory|jetstream] [-nats URL] [-session-timeout D] [FILE]")
	fmt.Fprintln(w, "Serves the cluster's monitor page at http://ADDR/ (JSON at /api/state), runs the commands of FILE")
	fmt.Fprintln(w, "(- or none: standard input, or the prompt on a terminal), then serves until interrupted.")
}

// runServe is `tributary serve -http ADDR [flags] [FILE]`: the monitor
// page of a new cluster served at ADDR while the commands of FILE (or of
// standard input, or the prompt when stdinTerminal) run on it, then until
// ctx ends (the program's: SIGINT or SIGTERM). The URL goes to stderr, so
// that stdout is what `tributary run` prints. The exit status is the
// commands' (1 when one failed), or 1 when ctx ended before they did.
func runServe(ctx context.Context, args []string, stdin io.Reader, stdinTerminal bool, stdout, stderr io.Writer) int {
	var addr string
	f, rest, err := parseSessionFlags("tributary serve", args, stdout, serveUsage, func(fs *flag.FlagSet) {
		fs.StringVar(&addr, "http", "", "serve the monitor page at this `address`, HOST:PORT (such as 127.0.0.1:8080; port 0: a free one)")
	})
	if code, done := flagExit(err, stderr, "tributary serve"); done {
		return code
	}
	if addr == "" {
		fmt.Fprintln(stderr, "tributary serve: -http ADDR is required, such as -http 127.0.0.1:8080 (tributary serve -h for help)")
		return exitUsage
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		fmt.Fprintf(stderr, "tributary serve: -http %s: want HOST:PORT, such as 127.0.0.1:8080\n", quote(addr))
		return exitUsage
	}
	if len(rest) > 1 {
		fmt.Fprintf(stderr, "tributary serve: want at most one FILE, got %d arguments (tributary serve -h for help)\n", len(rest))
		return exitUsage
	}
	input, name, dir, terminal := stdin, "stdin", ".", stdinTerminal
	if len(rest) == 1 && rest[0] != "-" {
		file, err := os.Open(rest[0])
		if err != nil {
			fmt.Fprintf(stderr, "tributary serve: %s\n", cutEchoes(err.Error(), rest))
			return exitFailed
		}
		defer file.Close()
		input, name, dir, terminal = file, rest[0], filepath.Dir(rest[0]), false
	} else if len(rest) == 1 {
		terminal = false
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "tributary serve: %s\n", cutEchoes(err.Error(), []string{addr}))
		return exitFailed
	}
	s, err := newSession(stdout, osReader(dir), f)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "tributary: %s\n", errText(err))
		return exitFailed
	}
	mon := monitor.New(s.c)
	mon.Start()
	srv := &http.Server{Handler: mon, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stderr, "tributary: monitor page at %s (JSON at %sapi/state)\n", url, url)

	done := make(chan int, 1)
	go func() {
		if terminal {
			fmt.Fprintln(stdout, "tributary: an in-process cluster; type help for the commands, quit to leave.")
			done <- prompt(s, stdout, stderr)
			return
		}
		done <- runScriptOn(s, f, input, name, stdout, stderr)
	}()
	var status int
	select {
	case status = <-done:
	case <-ctx.Done():
		// The commands may be blocked reading their input: the program
		// ends without waiting for them (nor closing the cluster they use).
		fmt.Fprintln(stderr, "tributary: interrupted while the commands ran")
		shutdown(srv, mon)
		return exitFailed
	}
	fmt.Fprintf(stderr, "tributary: commands done; serving %s until interrupted (Ctrl-C)\n", url)
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(stderr, "tributary serve: %v\n", err)
		status = exitFailed
	}
	shutdown(srv, mon)
	s.close()
	return status
}

// shutdown stops srv, giving open requests a second, then mon.
func shutdown(srv *http.Server, mon *monitor.Monitor) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close()
	}
	mon.Close()
}
