package main

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/examples"
	"github.com/f91dcac0/tributary/jetstream"
)

// Every shipped example script prints the same transcript on the JetStream
// backend (an embedded server, as `-backend jetstream` starts one) as on
// the in-memory one, given the same event time (-clock) and the same seed
// for the Random strategy (-seed).
func TestExampleScriptsSameOnJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded NATS server per script")
	}
	scripts, err := fs.Glob(examples.FS, "*.tri")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(scripts), 2)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	run := func(t *testing.T, name, backend string) string {
		script, err := examples.FS.ReadFile(name)
		require.NoError(t, err)
		var out, errOut bytes.Buffer
		f := sessionFlags{echo: true, capacity: 1000, window: 1000, now: func() time.Time { return at }, seed: 1, backend: backend}
		code := runScript(f, bytes.NewReader(script), name, examples.FS.ReadFile, &out, &errOut)
		require.Equal(t, exitOK, code, "%s on %s: stderr:\n%s", name, backend, errOut.String())
		require.Empty(t, errOut.String())
		return out.String()
	}
	for _, name := range scripts {
		t.Run(name, func(t *testing.T) {
			mem := run(t, name, "memory")
			js := run(t, name, "jetstream")
			require.NotEmpty(t, mem)
			require.Equal(t, mem, js, "%s: the transcripts differ", name)
		})
	}
}

// -backend, -nats and -seed are checked before anything runs.
func TestBackendFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "kafka"}, `-backend "kafka": must be memory or jetstream`},
		{[]string{"-nats", "nats://127.0.0.1:4222"}, `-nats "nats://127.0.0.1:4222": needs -backend jetstream`},
		{[]string{"-seed", "-2"}, `-seed -2: must be 0 or more, or -1 for unseeded`},
		{[]string{"-backend", "jetstream", "-nats", "http://foo"}, `-nats "http://foo": want nats://HOST:PORT`},
		{[]string{"-backend", "jetstream", "-nats", "nats://a:1,localhost"}, `want nats://HOST:PORT`},
	} {
		var out bytes.Buffer
		_, _, err := parseSessionFlags("tributary run", append(tc.args, "x.tri"), &out, usage)
		require.ErrorContains(t, err, tc.want)
	}
}

// With -seed, the Random strategy's partitions repeat from run to run.
func TestSeedMakesRandomReproducible(t *testing.T) {
	script := "create topic t String 8\ncreate producer r String Random\n" +
		strings.Repeat("produce event r t e.json\n", 12)
	files := fstest.MapFS{"e.json": {Data: []byte(`{"value": "x"}`)}}
	run := func(seed int) string {
		var out, errOut bytes.Buffer
		f := sessionFlags{capacity: 1000, window: 1000, now: time.Now, seed: seed, backend: "memory"}
		require.Equal(t, exitOK, runScript(f, strings.NewReader(script), "seed", files.ReadFile, &out, &errOut), errOut.String())
		return out.String()
	}
	a, b, c := run(3), run(3), run(4)
	require.Equal(t, a, b, "seed 3 twice")
	require.NotEqual(t, a, c, "seeds 3 and 4: 12 events on 8 partitions went to the same partitions")
}

// -backend picks the cluster's backend: the engine's, or a JetStream one on
// an embedded server whose temporary store the release removes.
func TestNewClusterBackend(t *testing.T) {
	c, release, err := newCluster(sessionFlags{capacity: 10, backend: "memory"})
	require.NoError(t, err)
	_, isJS := c.Backend().(*jetstream.Backend)
	require.False(t, isJS)
	release()
	if testing.Short() {
		return
	}
	c, release, err = newCluster(sessionFlags{capacity: 10, window: 2, backend: "jetstream"})
	require.NoError(t, err)
	_, isJS = c.Backend().(*jetstream.Backend)
	require.True(t, isJS, "-backend jetstream made a %T", c.Backend())
	require.NoError(t, c.Close())
	release()

	_, _, err = newCluster(sessionFlags{capacity: 10, backend: "jetstream", natsURL: "nats://127.0.0.1:1"})
	require.ErrorIs(t, err, jetstream.ErrUnavailable)
}

// A server that cannot be reached is one line with one "tributary:"
// prefix, saying "unavailable" once.
func TestUnreachableServerErrorSaysItOnce(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"run", "-backend", "jetstream", "-nats", "nats://127.0.0.1:1", "-"}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, exitFailed, code)
	msg := errOut.String()
	require.True(t, strings.HasPrefix(msg, "tributary: server unavailable: connecting to nats://127.0.0.1:1: "), msg)
	require.Equal(t, 1, strings.Count(msg, "\n"), msg)
	require.Equal(t, 1, strings.Count(msg, "tributary"), msg)
	require.Equal(t, 1, strings.Count(msg, "unavailable"), msg)
}
