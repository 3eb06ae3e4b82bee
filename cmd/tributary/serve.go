package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/f91dcac0/tributary/kafka"
	"github.com/f91dcac0/tributary/monitor"
)

// serveUsage is the usage line of `tributary serve`.
func serveUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: tributary serve [-http ADDR] [-kafka ADDR [-kafka-advertised ADDR]] [-keep-going] [-echo]")
	fmt.Fprintln(w, "                       [-capacity N] [-replay-window N] [-clock TIME] [-seed N]")
	fmt.Fprintln(w, "                       [-backend memory|jetstream]")
	fmt.Fprintln(w, "                       [-nats URL] [-session-timeout D] [FILE]")
	fmt.Fprintln(w, "Serves the cluster's monitor page at http://ADDR/ (JSON at /api/state), Kafka's wire protocol at the")
	fmt.Fprintln(w, "-kafka ADDR, or both (at least one is required), runs the commands of FILE (- or none: standard")
	fmt.Fprintln(w, "input, or the prompt on a terminal), then serves until interrupted.")
}

// runServe is `tributary serve [-http ADDR] [-kafka ADDR] [flags] [FILE]`:
// a new cluster's monitor page served at the -http address, its topics
// served over Kafka's wire protocol (package kafka) at the -kafka address,
// or both (at least one is required), while the commands of FILE (or of
// standard input, or the prompt when stdinTerminal) run on it, then until
// ctx ends (the program's: SIGINT or SIGTERM). Both addresses are checked
// (HOST:PORT: exit status 2) and listened on (an error: status 1) before
// the cluster starts. The URL, the Kafka address and the Kafka front
// end's log lines (slog text, Info and above) go to stderr, so that stdout
// is what `tributary run` prints. The exit status is the commands'
// (1 when one failed), or 1 when ctx ended before they did or a listener
// failed while serving.
func runServe(ctx context.Context, args []string, stdin io.Reader, stdinTerminal bool, stdout, stderr io.Writer) int {
	var httpAddr, kafkaAddr, advertised string
	f, rest, err := parseSessionFlags("tributary serve", args, stdout, serveUsage, func(fs *flag.FlagSet) {
		fs.StringVar(&httpAddr, "http", "", "serve the monitor page at this `address`, HOST:PORT (such as 127.0.0.1:8080; port 0: a free one)")
		fs.StringVar(&kafkaAddr, "kafka", "", "serve Kafka's wire protocol at this `address`, HOST:PORT (such as 127.0.0.1:9092; port 0: a free one)")
		fs.StringVar(&advertised, "kafka-advertised", "", "tell Kafka clients to connect to this `address`, HOST:PORT (default: the -kafka listener's)")
	})
	if code, done := flagExit(err, stderr, "tributary serve"); done {
		return code
	}
	if httpAddr == "" && kafkaAddr == "" {
		fmt.Fprintln(stderr, "tributary serve: -http ADDR or -kafka ADDR is required (or both), such as -http 127.0.0.1:8080 (tributary serve -h for help)")
		return exitUsage
	}
	if advertised != "" && kafkaAddr == "" {
		fmt.Fprintln(stderr, "tributary serve: -kafka-advertised needs -kafka ADDR (tributary serve -h for help)")
		return exitUsage
	}
	if host, _, err := net.SplitHostPort(advertised); err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			fmt.Fprintf(stderr, "tributary serve: -kafka-advertised %s: want a host clients can reach, not an empty or wildcard one\n", quote(advertised))
			return exitUsage
		}
	}
	for _, a := range []struct{ flag, addr, example string }{{"http", httpAddr, "127.0.0.1:8080"}, {"kafka", kafkaAddr, "127.0.0.1:9092"}, {"kafka-advertised", advertised, "broker.example:9092"}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			fmt.Fprintf(stderr, "tributary serve: -%s %s: want HOST:PORT, such as %s\n", a.flag, quote(a.addr), a.example)
			return exitUsage
		}
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
	var httpLn, kafkaLn net.Listener
	closeListeners := func() {
		for _, ln := range []net.Listener{httpLn, kafkaLn} {
			if ln != nil {
				ln.Close()
			}
		}
	}
	if httpAddr != "" {
		if httpLn, err = net.Listen("tcp", httpAddr); err != nil {
			fmt.Fprintf(stderr, "tributary serve: %s\n", cutEchoes(err.Error(), []string{httpAddr}))
			return exitFailed
		}
	}
	if kafkaAddr != "" {
		if kafkaLn, err = net.Listen("tcp", kafkaAddr); err != nil {
			closeListeners()
			fmt.Fprintf(stderr, "tributary serve: %s\n", cutEchoes(err.Error(), []string{kafkaAddr}))
			return exitFailed
		}
	}
	s, err := newSession(stdout, osReader(dir), f)
	if err != nil {
		closeListeners()
		fmt.Fprintf(stderr, "tributary: %s\n", errText(err))
		return exitFailed
	}
	var ks *kafka.Server
	if kafkaLn != nil {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if advertised == "" {
			advertised = kafkaLn.Addr().String()
		}
		ks, err = kafka.NewServer(s.c, kafka.WithAdvertisedAddr(advertised), kafka.WithLogger(logger))
		if err != nil {
			closeListeners()
			s.close()
			fmt.Fprintf(stderr, "tributary serve: %s\n", errText(err))
			return exitFailed
		}
	}

	// served gets a listener's error (ks.Serve after ks.Close: none).
	served := make(chan error, 2)
	var srv *http.Server
	var mon *monitor.Monitor
	var url string
	if httpLn != nil {
		mon = monitor.New(s.c)
		mon.Start()
		srv = &http.Server{Handler: mon, ReadHeaderTimeout: 10 * time.Second}
		go func() { served <- srv.Serve(httpLn) }()
		url = "http://" + httpLn.Addr().String() + "/"
		fmt.Fprintf(stderr, "tributary: monitor page at %s (JSON at %sapi/state)\n", url, url)
	}
	if ks != nil {
		go func() {
			if err := ks.Serve(kafkaLn); !errors.Is(err, kafka.ErrServerClosed) {
				served <- fmt.Errorf("-kafka: %w", err)
			}
		}()
		if advertised != kafkaLn.Addr().String() {
			fmt.Fprintf(stderr, "tributary: Kafka protocol at %s, clients told %s\n", kafkaLn.Addr(), advertised)
		} else {
			fmt.Fprintf(stderr, "tributary: Kafka protocol at %s\n", kafkaLn.Addr())
		}
	}
	stop := func() {
		if ks != nil {
			ks.Close()
		}
		if srv != nil {
			shutdown(srv, mon)
		}
	}

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
		stop()
		return exitFailed
	}
	switch {
	case url != "" && ks != nil:
		fmt.Fprintf(stderr, "tributary: commands done; serving %s until interrupted (Ctrl-C), and the Kafka protocol at %s\n", url, kafkaLn.Addr())
	case url != "":
		fmt.Fprintf(stderr, "tributary: commands done; serving %s until interrupted (Ctrl-C)\n", url)
	default:
		fmt.Fprintf(stderr, "tributary: commands done; serving the Kafka protocol at %s until interrupted (Ctrl-C)\n", kafkaLn.Addr())
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(stderr, "tributary serve: %v\n", err)
		status = exitFailed
	}
	stop()
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
