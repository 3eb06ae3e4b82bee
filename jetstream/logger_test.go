package jetstream_test

// Config.Logger: what the Backend logs for a rebalance and for a connection
// lost and back.

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/jetstream"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogger: a Backend given Config.Logger logs a rebalance at Info (the
// group, its generation and members), and a server restart as the
// connection lost (Warn) and back (Info).
func TestLogger(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var out syncBuffer
	b, err := jetstream.Open(jetstream.Config{
		Server: srv, Prefix: "LOG", Storage: jetstream.MemoryStorage, Capacity: 10,
		Logger: slog.New(slog.NewTextHandler(&out, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if ok, err := b.CreateTopic("orders", 2, "string"); !ok || err != nil {
		t.Fatalf("CreateTopic: %v, %v", ok, err)
	}
	tp, _, err := b.OpenTopic("orders")
	if err != nil {
		t.Fatal(err)
	}
	m, err := tp.Member("g", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Join(); err != nil {
		t.Fatal(err)
	}
	want := `level=INFO msg="tributary/jetstream: group rebalanced" topic=orders group=g generation=1 members=[m1] assignor=RoundRobin`
	if !strings.Contains(out.String(), want) {
		t.Fatalf("log lacks %q:\n%s", want, out.String())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "connection back") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{`level=WARN msg="tributary/jetstream: connection lost" prefix=LOG`, `level=INFO msg="tributary/jetstream: connection back" prefix=LOG`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
}
