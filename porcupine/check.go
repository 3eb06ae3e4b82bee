package porcupine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	porc "github.com/anishathalye/porcupine"
)

// Result is the verdict on one History.
type Result struct {
	// Verdict is porc.Ok, porc.Illegal, or porc.Unknown when the checker
	// ran out of time. Unknown is not a pass.
	Verdict porc.CheckResult
	// Topic is, for Illegal, the first topic (in History.Topics order)
	// whose subhistory is Illegal on its own; "" otherwise.
	Topic string
	// Elapsed is the wall time of the main check (all topics in parallel),
	// not counting the search for Topic.
	Elapsed time.Duration
}

// Check checks h for linearizability against Model(h.Config) with
// porcupine's CheckOperationsTimeout: every topic's subhistory in parallel,
// stopping at the first Illegal one or after timeout (0: no limit). For an
// Illegal history it then checks each topic alone, in order, to name the
// first Illegal one in Result.Topic.
func Check(h History, timeout time.Duration) Result {
	m := Model(h.Config)
	start := time.Now()
	res := Result{Verdict: porc.CheckOperationsTimeout(m, operations(h.Ops), timeout)}
	res.Elapsed = time.Since(start)
	if res.Verdict == porc.Illegal {
		for _, topic := range h.Topics() {
			if porc.CheckOperationsTimeout(m, operations(h.Topic(topic).Ops), timeout) == porc.Illegal {
				res.Topic = topic
				break
			}
		}
	}
	return res
}

// Visualize checks topic's subhistory of h with CheckOperationsVerbose
// (which, unlike Check, computes the partial linearizations the
// visualization draws; timeout 0 means no limit) and writes porcupine's
// HTML visualization of it to path, creating or truncating the file. It
// returns the verbose check's verdict and any error writing the file.
func Visualize(h History, topic string, path string, timeout time.Duration) (porc.CheckResult, error) {
	m := Model(h.Config)
	verdict, info := porc.CheckOperationsVerbose(m, operations(h.Topic(topic).Ops), timeout)
	return verdict, porc.VisualizePath(m, info, path)
}

// Fixture is a History kept with its expected verdict, as stored in
// testdata/*.json and replayed by TestFixtures.
type Fixture struct {
	// Verdict is "Ok" or "Illegal" for a regression fixture; "Unknown" for
	// a history whose check timed out, kept for a longer check.
	Verdict porc.CheckResult `json:"verdict"`
	// Note says where the history came from.
	Note string `json:"note"`
	History
}

// ReadFixture reads a Fixture written by WriteFixture, of any history
// version (see HistoryVersion). Errors: the file's, a malformed fixture, a
// verdict other than Ok, Illegal or Unknown, or a Config that fails Check.
func ReadFixture(path string) (Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Fixture{}, err
	}
	var f Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		return Fixture{}, fmt.Errorf("porcupine: fixture %s: %w", path, err)
	}
	switch f.Verdict {
	case porc.Ok, porc.Illegal, porc.Unknown:
	default:
		return Fixture{}, fmt.Errorf("porcupine: fixture %s: verdict %q, want Ok, Illegal or Unknown", path, f.Verdict)
	}
	if err := f.Config.Check(); err != nil {
		return Fixture{}, fmt.Errorf("porcupine: fixture %s: %w", path, err)
	}
	return f, nil
}

// WriteFixture writes f to path as indented JSON, one Op per line,
// creating or truncating the file.
func WriteFixture(path string, f Fixture) error {
	ops := f.Ops
	f.Ops = nil
	head, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	// Replace the empty "ops": null with one op per line, for readable diffs.
	const tail = "  \"ops\": null\n}"
	if !bytes.HasSuffix(head, []byte(tail)) {
		return fmt.Errorf("porcupine: WriteFixture: unexpected encoding %q", head[max(0, len(head)-40):])
	}
	buf := head[:len(head)-len(tail)]
	buf = append(buf, "  \"ops\": ["...)
	for i, op := range ops {
		line, err := json.Marshal(op)
		if err != nil {
			return err
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, "\n    "...)
		buf = append(buf, line...)
	}
	buf = append(buf, "\n  ]\n}\n"...)
	return os.WriteFile(path, buf, 0o644)
}
