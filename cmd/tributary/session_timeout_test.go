package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/backendtest"
)

// -session-timeout (contract rule 24): show consumer group gives each
// member's last-seen age; a consumer that no command names for the
// timeout expires, and the next consume of it joins it again, saying so.
// The broker runs on a fake clock (sessionFlags.brokerNow), so ages are
// exact.
func TestSessionTimeoutFlag(t *testing.T) {
	clock := backendtest.NewFakeClock()
	var out bytes.Buffer
	files := fstest.MapFS{"e.json": &fstest.MapFile{Data: []byte(`{"value": "x"}`)}}
	s, err := newSession(&out, files.ReadFile, sessionFlags{capacity: 100, window: 100, now: time.Now,
		backend: "memory", session: 10 * time.Second, brokerNow: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { s.close() })
	run := func(line string) string {
		t.Helper()
		out.Reset()
		require.NoError(t, s.exec(line), line)
		return out.String()
	}
	run("create topic orders String 2")
	run("create consumer group billing orders RoundRobin")
	run("create consumer billing c1")
	clock.Advance(3 * time.Second)
	run("create consumer billing c2")
	run("create producer web String Manual")
	run("produce event web orders e.json p0")
	clock.Advance(4 * time.Second)
	show := run("show consumer group billing")
	require.Contains(t, show, "session timeout 10s; last seen: c1 7s ago, c2 4s ago\n", show)

	// c1 is named by no command for 10 s: the show expires it; its
	// consume joins it again.
	clock.Advance(3 * time.Second)
	show = run("show consumer group billing")
	require.Contains(t, show, "members c2\n", show)
	require.Contains(t, show, "last seen: c2 7s ago\n", show)
	got := run("consume event c1 p0")
	require.Contains(t, got, "c1 had expired (no command named it for the session timeout, 10s) and joined again: ", got)
	require.Contains(t, got, "x", "the consume went on: %s", got)
	show = run("show consumer group billing")
	require.Contains(t, show, "members c1 c2\n", show)
	require.Contains(t, show, "last seen: c1 0s ago, c2 7s ago\n", show)
}

// Without -session-timeout the program's consumers never expire and show
// consumer group prints no last-seen line (the transcripts in examples/
// stay as they are).
func TestNoSessionTimeoutByDefault(t *testing.T) {
	clock := backendtest.NewFakeClock()
	var out bytes.Buffer
	s, err := newSession(&out, fstest.MapFS{}.ReadFile, sessionFlags{capacity: 100, window: 100, now: time.Now,
		backend: "memory", brokerNow: clock.Now})
	require.NoError(t, err)
	t.Cleanup(func() { s.close() })
	for _, line := range []string{"create topic orders String", "create consumer group billing orders Range", "create consumer billing c1"} {
		require.NoError(t, s.exec(line), line)
	}
	clock.Advance(24 * time.Hour)
	out.Reset()
	require.NoError(t, s.exec("show consumer group billing"))
	require.Contains(t, out.String(), "members c1\n")
	require.NotContains(t, out.String(), "last seen")
}

// -session-timeout is checked before any work: negative, or with the
// JetStream backend, it is refused naming the flag.
func TestSessionTimeoutFlagChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-session-timeout", "-1s"}, "-session-timeout -1s: must be 0 (none) or more"},
		{[]string{"-session-timeout", "10s", "-backend", "jetstream"}, "-session-timeout 10s: needs -backend memory"},
		{[]string{"-session-timeout", "ten"}, "session-timeout"},
	} {
		var out bytes.Buffer
		_, _, err := parseSessionFlags("tributary run", append(tc.args, "x.tri"), &out, usage)
		require.Error(t, err, "%v", tc.args)
		require.True(t, strings.Contains(err.Error(), tc.want), "%v: %v", tc.args, err)
	}
	f, _, err := parseSessionFlags("tributary run", []string{"-session-timeout", "45s", "x.tri"}, &bytes.Buffer{}, usage)
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, f.session)
}
