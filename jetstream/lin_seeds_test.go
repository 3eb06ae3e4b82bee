package jetstream_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	porc "github.com/anishathalye/porcupine"

	"github.com/f91dcac0/tributary/jetstream"
	"github.com/f91dcac0/tributary/porcupine"
)

// TestLinSeeds checks the mixes named in TRIBUTARY_JS_MIXES (comma
// separated; default: linMixes) over the seeds TRIBUTARY_JS_SEEDS names
// ("lo-hi", inclusive) on one embedded server, with checkMixes' workload
// (2 topics, 4 clients, 30 calls each, 1 partition), and reports every
// history that is not Ok rather than stopping at the first; only when
// TRIBUTARY_JS_SEEDS is set (about 0.7 s a history under -race on two
// cores). Example: TRIBUTARY_JS_SEEDS=0-299 TRIBUTARY_JS_MIXES=seek,window.
func TestLinSeeds(t *testing.T) {
	spec := os.Getenv("TRIBUTARY_JS_SEEDS")
	if spec == "" {
		t.Skip("set TRIBUTARY_JS_SEEDS=lo-hi")
	}
	var lo, hi uint64
	if _, err := fmt.Sscanf(spec, "%d-%d", &lo, &hi); err != nil || lo > hi {
		t.Fatalf("TRIBUTARY_JS_SEEDS=%q: want lo-hi, lo <= hi (%v)", spec, err)
	}
	mixes := linMixes
	if s := os.Getenv("TRIBUTARY_JS_MIXES"); s != "" {
		mixes = strings.Split(s, ",")
	}
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for _, mix := range mixes {
		start, bad := time.Now(), 0
		for seed := lo; seed <= hi; seed++ {
			w, err := porcupine.Workload{Seed: seed, Mix: mix, Topics: 2, Clients: 4, OpsPerClient: 30, Partitions: 1}.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			b := linBackend(t, srv, "", 1, w)
			h, err := porcupine.RunOn(w, porcupine.BackendTarget(b))
			b.Close()
			if err != nil {
				t.Fatal(err)
			}
			h = withoutDescribe(h)
			if res := porcupine.Check(h, 30*time.Second); res.Verdict != porc.Ok {
				bad++
				sub := h
				if res.Topic != "" {
					sub = h.Topic(res.Topic)
				}
				t.Errorf("mix %s, seed %d, %v: %s on topic %q\n%s", mix, seed, h.Workload, res.Verdict, res.Topic, dumpHistory(sub))
			}
		}
		t.Logf("mix %s, seeds %d-%d: %d histories not Ok, in %v", mix, lo, hi, bad, time.Since(start))
	}
}
