package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The prompt in a real terminal 80 columns wide: a command line longer
// than the terminal wraps onto the next row, whole, both while it is typed
// and once entered, instead of being shown as a sideways-scrolled window
// ("tributary> {1.json), …"). tmux is the terminal; the test is skipped
// where it is not installed.
func TestPromptWrapsLongLine(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A link named tributary makes this test binary the program (TestMain).
	dir := t.TempDir()
	prog := filepath.Join(dir, "tributary")
	if err := os.Symlink(exe, prog); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-s", "t", "-x", "80", "-y", "24",
		"env", "HOME="+dir, "XDG_CACHE_HOME="+dir, "TERM=xterm", prog)
	t.Cleanup(func() { exec.Command(tmux, "-S", socket, "kill-server").Run() })

	// waitFor returns the screen once it contains want; the guard bounds a
	// hang, it is not a speed assertion.
	waitFor := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			screen := tm("capture-pane", "-p", "-J", "-t", "t")
			if strings.Contains(screen, want) {
				return screen
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %q:\n%s", want, screen)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("tributary> ")
	line := "parallel produce (web, orders, order-1.json), (web, payments, order-2.json), (web, orders, order-3.json)"
	tm("send-keys", "-t", "t", "-l", line)
	// -J joins rows that the terminal wrapped, so the whole line reads as
	// one: it is all on screen, after the prompt.
	screen := waitFor("tributary> " + line)
	if strings.Contains(screen, "{") {
		t.Errorf("the line is drawn as a scrolled window:\n%s", screen)
	}
	tm("send-keys", "-t", "t", "Enter")
	screen = waitFor(`unknown producer "web"`)
	if !strings.Contains(screen, "tributary> "+line) || strings.Contains(screen, "{") {
		t.Errorf("after Enter the entered line is not shown whole:\n%s", screen)
	}
}
