//go:build unix

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An event file that is a FIFO is refused at once instead of blocking the
// program on a read that no writer ends.
func TestEventFileFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	script := "create topic t String\ncreate producer p String Key\nproduce event p t fifo.json\n"
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		f := sessionFlags{capacity: 10, now: time.Now}
		done <- runScript(f, strings.NewReader(script), "fifo.tri", osReader(dir), &out, &errOut)
	}()
	select {
	case code := <-done:
		if code != exitFailed || errOut.String() != "fifo.tri:3: bad event file fifo.json: not a regular file\n" {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("produce of a FIFO blocked")
	}
}
