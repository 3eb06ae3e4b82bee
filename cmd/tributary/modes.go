package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/peterh/liner"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/cmd/internal/flagx"
	"github.com/f91dcac0/tributary/engine"
)

// sessionFlags are the flags of the interactive prompt and of run.
type sessionFlags struct {
	keepGoing bool
	echo      bool
	capacity  int
	window    int // replay window; -1: capacity
	clock     string
	now       func() time.Time // from clock
	seed      int              // the Random strategy's seed; -1: unseeded
	backend   string           // "memory" or "jetstream"
	natsURL   string           // jetstream: the server; "": an embedded one
	// session is the broker's session timeout (contract rule 24); 0: none,
	// members never expire.
	session time.Duration
	// brokerNow is the broker clock (session timeouts, last-seen ages);
	// nil: the wall clock. Tests set a fake one; no flag does.
	brokerNow func() time.Time
}

// parseSessionFlags parses args for cmd ("tributary", "tributary run" or
// "tributary serve", whose own flags extra defines), flags before or
// after the positional arguments, and returns the
// positional arguments. Every value is checked before any work; a bad one
// is one line naming the flag (and its range), -h prints the usage on
// stdout.
func parseSessionFlags(cmd string, args []string, stdout io.Writer, usage func(io.Writer), extra ...func(*flag.FlagSet)) (sessionFlags, []string, error) {
	f := sessionFlags{capacity: 1000, window: -1, now: time.Now, seed: -1, backend: "memory"}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, define := range extra { // a mode's own flags (serve's -http)
		define(fs)
	}
	fs.BoolVar(&f.keepGoing, "keep-going", false, "in a script, report a failing command and go on (the exit status is still 1)")
	fs.BoolVar(&f.echo, "echo", false, "print each command (after \"> \") and comment before its output, like a transcript")
	flagx.IntVar(fs, &f.capacity, "capacity", f.capacity, "events each partition retains, 1..16777216 (a full partition refuses events until every group acks; memory follows what is retained)")
	flagx.IntVar(fs, &f.window, "replay-window", f.window, "consumed events each partition keeps for playback, 0..capacity; -1: the capacity (the oldest fully consumed event makes room for a new one)")
	fs.StringVar(&f.clock, "clock", "", "stamp every produced event with this RFC 3339 time instead of the clock (reproducible output)")
	flagx.IntVar(fs, &f.seed, "seed", f.seed, "seed the Random strategy's draws (each producer from the seed and its name), for reproducible output; -1: unseeded")
	defineBackendFlags(fs, &f.backend, &f.natsURL, "the cluster")
	fs.DurationVar(&f.session, "session-timeout", 0, "a consumer that no command names for this `duration` (such as 45s, Kafka's default) expires: it leaves its group, and its next consume (when it would own the partition) or create consumer of its name joins it again; 0: consumers never expire (memory backend only)")
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(stdout)
				fmt.Fprintln(stdout, "\nFlags:")
				printFlags(stdout, fs)
				return f, nil, err
			}
			return f, nil, fmt.Errorf("%s (%s -h lists the flags and their ranges)", cutEchoes(err.Error(), args), cmd)
		}
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	if f.capacity < engine.MinCapacity || f.capacity > tributary.MaxCapacity {
		return f, nil, fmt.Errorf("-capacity %d: must be in %d..%d", f.capacity, engine.MinCapacity, tributary.MaxCapacity)
	}
	if f.window == -1 {
		f.window = f.capacity
	}
	if f.window < 0 || f.window > f.capacity {
		return f, nil, fmt.Errorf("-replay-window %d: must be in 0..%d (the capacity), or -1 for the capacity", f.window, f.capacity)
	}
	if f.session < 0 {
		return f, nil, fmt.Errorf("-session-timeout %v: must be 0 (none) or more, such as 45s", f.session)
	}
	if f.session > 0 && f.backend != "memory" {
		return f, nil, fmt.Errorf("-session-timeout %v: needs -backend memory (on JetStream a session is refreshed only by heartbeats, which the program's commands do not send)", f.session)
	}
	if f.seed < -1 {
		return f, nil, fmt.Errorf("-seed %d: must be 0 or more, or -1 for unseeded", f.seed)
	}
	if err := checkBackend(f.backend, f.natsURL); err != nil {
		return f, nil, err
	}
	if f.clock != "" {
		t, err := time.Parse(time.RFC3339, f.clock)
		if err != nil {
			return f, nil, fmt.Errorf("-clock %s: must be an RFC 3339 time such as 2026-12-01T12:00:00Z", quote(f.clock))
		}
		f.now = func() time.Time { return t }
	}
	return f, rest, nil
}

// runInteractive is `tributary` with no command: a prompt with line
// editing and history when standard input is a terminal (and standard
// output too: otherwise the prompt has no line editing), otherwise the
// commands on standard input run as a script.
func runInteractive(args []string, stdin io.Reader, stdout, stderr io.Writer, isTerminal bool) int {
	f, rest, err := parseSessionFlags("tributary", args, stdout, usage)
	if code, done := flagExit(err, stderr, "tributary"); done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "tributary: unknown command %s (try tributary help)\n", quote(rest[0]))
		return exitUsage
	}
	if !isTerminal {
		return runScript(f, stdin, "stdin", osReader("."), stdout, stderr)
	}
	s, err := newSession(stdout, osReader("."), f)
	if err != nil {
		fmt.Fprintf(stderr, "tributary: %s\n", errText(err))
		return exitFailed
	}
	defer s.close()
	fmt.Fprintln(stdout, "tributary: an in-process cluster; type help for the commands, quit to leave.")
	return prompt(s, stdout, stderr)
}

// prompt reads commands at a prompt with line editing and history, and
// runs them on s, until quit or end of input (exitOK).
func prompt(s *session, stdout, stderr io.Writer) int {
	ln := liner.NewLiner()
	defer ln.Close()
	// A line longer than the terminal wraps onto the next rows instead of
	// scrolling sideways, where liner shows only a window of it between
	// "{" and "}" (so a long parallel produce read "tributary> {, …").
	ln.SetMultiLineMode(true)
	ln.SetCtrlCAborts(true)
	ln.SetCompleter(complete)
	history := historyFile()
	if h, err := os.Open(history); err == nil {
		ln.ReadHistory(h) //nolint:errcheck // a damaged history only loses history
		h.Close()
	}
	defer func() {
		if history == "" {
			return
		}
		if h, err := os.Create(history); err == nil {
			ln.WriteHistory(h) //nolint:errcheck // best effort
			h.Close()
		}
	}()
	for {
		line, err := ln.Prompt("tributary> ")
		if errors.Is(err, liner.ErrPromptAborted) {
			continue // Ctrl-C clears the line
		}
		if err != nil { // io.EOF: Ctrl-D
			fmt.Fprintln(stdout)
			return exitOK
		}
		if strings.TrimSpace(line) != "" {
			ln.AppendHistory(line)
		}
		err = s.exec(line)
		if errors.Is(err, errQuit) {
			return exitOK
		}
		if err != nil {
			fmt.Fprintf(stderr, "error: %s\n", errText(err))
		}
	}
}

// historyFile is where the prompt keeps its history, "" when there is no
// home for it.
func historyFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "tributary")
	if os.MkdirAll(dir, 0o700) != nil {
		return ""
	}
	return filepath.Join(dir, "history")
}

// complete completes a command's keywords at the prompt.
func complete(line string) []string {
	var out []string
	for _, c := range commands {
		if name := c.name(); strings.HasPrefix(name, line) && name != line {
			out = append(out, name+" ")
		}
	}
	return out
}

// runRun is `tributary run [flags] FILE`: the commands of FILE ("-": standard
// input), one per line.
func runRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	runUsage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: tributary run [-keep-going] [-echo] [-capacity N] [-replay-window N] [-clock TIME]")
		fmt.Fprintln(w, "                     [-seed N] [-backend memory|jetstream] [-nats URL] [-session-timeout D] FILE")
		fmt.Fprintln(w, "Runs the commands of FILE (- for standard input) on a new cluster; stops at the first error.")
	}
	f, rest, err := parseSessionFlags("tributary run", args, stdout, runUsage)
	if code, done := flagExit(err, stderr, "tributary run"); done {
		return code
	}
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "tributary run: want one FILE, got %d arguments (tributary run -h for help)\n", len(rest))
		return exitUsage
	}
	if rest[0] == "-" {
		return runScript(f, stdin, "stdin", osReader("."), stdout, stderr)
	}
	file, err := os.Open(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "tributary run: %s\n", cutEchoes(err.Error(), rest))
		return exitFailed
	}
	defer file.Close()
	return runScript(f, file, rest[0], osReader(filepath.Dir(rest[0])), stdout, stderr)
}

// defineBackendFlags defines -backend (default memory) and -nats (default
// none) on fs, into *backend and *natsURL; what says what lives on the
// backend ("the cluster"). checkBackend checks their values.
func defineBackendFlags(fs *flag.FlagSet, backend, natsURL *string, what string) {
	*backend, *natsURL = "memory", ""
	fs.StringVar(backend, "backend", *backend, "where "+what+" lives: memory (this process) or jetstream (NATS JetStream streams)")
	fs.StringVar(natsURL, "nats", "", "with -backend jetstream: the NATS server's URL, such as nats://127.0.0.1:4222; empty: start an embedded server for this run")
}

// checkBackend checks the values of -backend and -nats: backend memory or
// jetstream; natsURL empty, or with jetstream one or more nats://, tls://,
// ws:// or wss:// URLs with a host, separated by commas. The error is one
// line naming the flag, its value and what it must be.
func checkBackend(backend, natsURL string) error {
	switch backend {
	case "memory":
		if natsURL != "" {
			return fmt.Errorf("-nats %s: needs -backend jetstream", quote(natsURL))
		}
	case "jetstream":
		for _, u := range strings.Split(natsURL, ",") {
			if natsURL == "" {
				break
			}
			if pu, err := url.Parse(strings.TrimSpace(u)); err != nil || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, pu.Scheme) || pu.Host == "" {
				return fmt.Errorf("-nats %s: want nats://HOST:PORT (or tls://, ws://, wss://), several separated by commas", quote(natsURL))
			}
		}
	default:
		return fmt.Errorf("-backend %s: must be memory or jetstream", quote(backend))
	}
	return nil
}

// flagExit turns a flag error into the exit status: help is success, any
// other error one line and exitUsage.
func flagExit(err error, stderr io.Writer, cmd string) (int, bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	return exitUsage, true
}

// runScript runs the commands of r, named name in messages, on a new
// session. It stops at the first error (exit status 1) unless keepGoing,
// printing "name:line: error" on stderr.
func runScript(f sessionFlags, r io.Reader, name string, readFile func(string) ([]byte, error), stdout, stderr io.Writer) int {
	s, err := newSession(stdout, readFile, f)
	if err != nil {
		fmt.Fprintf(stderr, "tributary: %s\n", errText(err))
		return exitFailed
	}
	defer s.close()
	return runScriptOn(s, f, r, name, stdout, stderr)
}

// runScriptOn runs the commands of r on s, as runScript does.
func runScriptOn(s *session, f sessionFlags, r io.Reader, name string, stdout, stderr io.Writer) int {
	br := bufio.NewReader(r)
	status := exitOK
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff") // a byte order mark some editors write
		}
		if err == nil {
			if f.echo {
				echo(stdout, line)
			}
			err = s.exec(line)
		}
		if errors.Is(err, errQuit) {
			break
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s:%d: %s\n", name, n, errText(err))
			status = exitFailed
			if !f.keepGoing || errors.Is(err, errReading) {
				return status
			}
		}
	}
	return status
}

// maxLine is the longest script line read, in bytes.
const maxLine = 1 << 20

// errReading wraps an error reading the script itself: it ends the run,
// -keep-going or not.
var errReading = errors.New("cannot read the script")

// readLine reads one line without its line ending ("\n" or "\r\n"); io.EOF
// at the end. A line longer than maxLine ends the script (errReading):
// skipping to its end could read for ever (run /dev/zero).
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(b)+len(chunk) > maxLine+2 {
			return "", fmt.Errorf("%w: the line is longer than %d bytes", errReading, maxLine)
		}
		b = append(b, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && err != io.EOF:
			return "", fmt.Errorf("%w: %v", errReading, err)
		case err == io.EOF && len(b) == 0:
			return "", io.EOF
		}
		line := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if strings.ContainsRune(line, '\r') {
			return "", fmt.Errorf("%w: a carriage return inside the line: use \\n or \\r\\n line endings", errReading)
		}
		return line, nil
	}
}

// echo prints a script line as a transcript shows it: commands after "> ",
// comments and blank lines as they are.
func echo(w io.Writer, line string) {
	t := strings.TrimSpace(line)
	if t == "" || strings.HasPrefix(t, "#") {
		fmt.Fprintln(w, t)
		return
	}
	fmt.Fprintln(w, "> "+t)
}

// maxEventFile is the largest event file read, in bytes.
const maxEventFile = 1 << 20

// osReader reads event files relative to dir (absolute names as they are),
// refusing directories and anything over maxEventFile bytes (so /dev/zero
// is an error, not a hang).
func osReader(dir string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		where := ""
		if !filepath.IsAbs(name) {
			where = " (looked in " + clipped(dir) + ")"
			if dir == "." {
				where = " (looked in the working directory)"
			}
			name = filepath.Join(dir, filepath.FromSlash(name))
		}
		st, err := os.Stat(name)
		switch {
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("%v%s", err, where)
		case st.IsDir():
			return nil, errors.New("is a directory")
		case !st.Mode().IsRegular():
			return nil, errors.New("not a regular file")
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxEventFile+1))
		if err == nil && len(b) > maxEventFile {
			err = fmt.Errorf("larger than %d bytes", maxEventFile)
		}
		return b, err
	}
}

// errText is err's message on one line, without the library's
// "tributary: " and "tributary/jetstream: " prefixes (the program's name,
// or the script's line, says that already).
func errText(err error) string {
	msg := strings.ReplaceAll(err.Error(), "tributary/jetstream: ", "")
	msg = strings.ReplaceAll(msg, "tributary: ", "")
	msg = strings.ReplaceAll(msg, "\n", "; ")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(msg, "?"))
}
