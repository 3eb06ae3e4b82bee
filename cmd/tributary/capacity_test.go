package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCapacityFlag: -capacity accepts 1..16,777,216 (the typed library's
// bound, docs/contract.md) and -replay-window follows it.
func TestCapacityFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" : accepted
	}{
		{[]string{"-capacity", "16777216"}, ""},
		{[]string{"-capacity", "5000", "-replay-window", "5000"}, ""},
		{[]string{"-capacity", "16777217"}, "-capacity 16777217: must be in 1..16777216"},
		{[]string{"-capacity", "0"}, "-capacity 0: must be in 1..16777216"},
		{[]string{"-capacity", "5000", "-replay-window", "5001"}, "-replay-window 5001: must be in 0..5000 (the capacity)"},
	} {
		var out bytes.Buffer
		f, _, err := parseSessionFlags("tributary run", append(tc.args, "x.tri"), &out, usage)
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.args)
			require.Equal(t, tc.args[1], strconv.Itoa(f.capacity))
			continue
		}
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

// TestCapacityBeyondOneThousand: a script on -capacity 2000 retains 1,500
// events in one partition with no consumer, where a partition of capacity
// 1,000 refuses the 1,001st.
func TestCapacityBeyondOneThousand(t *testing.T) {
	script := "create topic t String 1\ncreate producer r String Manual\n" +
		strings.Repeat("produce event r t e.json 0\n", 1500)
	files := fstest.MapFS{"e.json": {Data: []byte(`{"value": "x"}`)}}
	run := func(capacity int) (int, string) {
		var out, errOut bytes.Buffer
		f := sessionFlags{capacity: capacity, window: 0, now: time.Now, backend: "memory"}
		return runScript(f, strings.NewReader(script), "capacity", files.ReadFile, &out, &errOut), errOut.String()
	}
	code, stderr := run(2000)
	require.Equal(t, exitOK, code, stderr)
	code, stderr = run(1000)
	require.Equal(t, exitFailed, code, "capacity 1000 took 1,500 events")
	require.Contains(t, stderr, "full", stderr)
}
