package main

import (
	"bytes"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/examples"
)

// Every shipped example script prints the same transcript on the JetStream
// backend (an embedded server, as `-backend jetstream` starts one) as on
// the in-memory one, given the same event time (-clock).
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
		f := sessionFlags{echo: true, capacity: 1000, window: 1000, now: func() time.Time { return at }, backend: backend}
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

// -backend and -nats are checked before anything runs.
func TestBackendFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "kafka"}, `-backend "kafka": must be memory or jetstream`},
		{[]string{"-nats", "nats://127.0.0.1:4222"}, `-nats "nats://127.0.0.1:4222": needs -backend jetstream`},
	} {
		var out bytes.Buffer
		_, _, err := parseSessionFlags("tributary run", append(tc.args, "x.tri"), &out, usage)
		require.ErrorContains(t, err, tc.want)
	}
}
