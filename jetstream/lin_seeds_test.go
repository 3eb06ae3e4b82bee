package jetstream_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/jetstream"
)

// TestLinSeeds checks the mixes named in TRIBUTARY_JS_MIXES (comma
// separated; default: linMixes) over the seeds TRIBUTARY_JS_SEEDS names
// ("lo-hi", inclusive), with checkMixes' workload (2 topics, 4 clients,
// TRIBUTARY_JS_OPS calls each, default 30, 1 partition), on one embedded
// server or, with TRIBUTARY_JS_CLUSTER=1, on a 3-node cluster with
// Replicas 3, and reports every history that is not Ok (its mix and seed)
// rather than stopping at the first; with TRIBUTARY_JS_DUMP=dir it also
// writes each such history to dir/<mix>-<seed>.txt. Only when
// TRIBUTARY_JS_SEEDS is set (about 0.7 s a history under -race on two
// cores, 2 s on the cluster). Example: TRIBUTARY_JS_SEEDS=0-299
// TRIBUTARY_JS_MIXES=seek,window.
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
	ops := 30
	if v := os.Getenv("TRIBUTARY_JS_OPS"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &ops); err != nil || ops < 1 {
			t.Fatalf("TRIBUTARY_JS_OPS=%q: want a positive count (%v)", v, err)
		}
	}
	var srv *jetstream.Server
	urls, replicas := "", 1
	if os.Getenv("TRIBUTARY_JS_CLUSTER") == "1" {
		cl, err := jetstream.StartCluster(3, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Shutdown()
		urls, replicas = strings.Join(cl.URLs(), ","), 3
	} else {
		var err error
		if srv, err = jetstream.StartServer(t.TempDir()); err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
	}
	dump := os.Getenv("TRIBUTARY_JS_DUMP")
	for _, mix := range mixes {
		start, bad := time.Now(), 0
		for seed := lo; seed <= hi; seed++ {
			if _, text := linHistory(t, srv, urls, replicas, mix, seed, 4, ops); text != "" {
				bad++
				t.Error(text)
				if dump != "" {
					if err := os.WriteFile(fmt.Sprintf("%s/%s-%d.txt", dump, mix, seed), []byte(text), 0o644); err != nil {
						t.Error(err)
					}
				}
			}
		}
		t.Logf("mix %s, seeds %d-%d: %d histories not Ok, in %v", mix, lo, hi, bad, time.Since(start))
	}
}
