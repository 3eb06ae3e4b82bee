package jetstream_test

// The backend against the in-memory engine: random sequential calls on one
// topic, every answer and, after each step, the whole Snapshot compared,
// for capacities 1–3, every replay window and both storages.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestDifferential runs random sequential operations (publish,
// poll, ack, retry, seek, join, leave, create and delete groups) on one
// topic of 1 or 2 partitions against the in-memory engine and the
// JetStream backend (one replica: snapshot reads and deferred purges)
// with capacity 1..3 and replay windows 0..capacity, and compares every
// answer and, after each step, the whole state (Snapshot).
func TestDifferential(t *testing.T) {
	for _, st := range []jetstream.Storage{jetstream.MemoryStorage, jetstream.FileStorage} {
		t.Run(map[jetstream.Storage]string{jetstream.MemoryStorage: "memory", jetstream.FileStorage: "file"}[st], func(t *testing.T) { differential(t, st) })
	}
}

func differential(t *testing.T, storage jetstream.Storage) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	deadline := time.Now().Add(4 * time.Second)
	seeds := 0
	for seed := uint64(1); time.Now().Before(deadline) && seed <= 400; seed++ {
		seeds++
		r := rand.New(rand.NewPCG(seed, 23))
		capacity := int32(1 + r.IntN(3))
		window := int32(r.IntN(int(capacity) + 1))
		parts := int32(1 + r.IntN(2))
		eb, err := tributary.NewEngineBackend(capacity, engine.WithReplayWindow(window))
		if err != nil {
			t.Fatal(err)
		}
		jb, err := jetstream.Open(jetstream.Config{Server: srv, Prefix: fmt.Sprintf("D%d", seed), Storage: storage,
			Capacity: capacity, ReplayWindow: window, RequestTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		sides := []*diffSide{{name: "engine", b: eb, ms: map[string]tributary.BackendMember{}}, {name: "jetstream", b: jb, ms: map[string]tributary.BackendMember{}}}
		for _, s := range sides {
			if ok, err := s.b.CreateTopic("t", parts, "string"); !ok || err != nil {
				t.Fatal(ok, err)
			}
			s.bt, _, _ = s.b.OpenTopic("t")
		}
		var log []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (capacity %d, window %d, parts %d):\n%s\n"+format, append([]any{seed, capacity, window, parts, strings.Join(log, "\n")}, args...)...)
		}
		groups := []string{"g0", "g1", "g2"}
		members := []string{"a", "b"}
		npub := 0
		for step := 0; step < 60; step++ {
			g := groups[r.IntN(len(groups))]
			m := members[r.IntN(len(members))]
			p := int32(r.IntN(int(parts)))
			var op string
			var res [2]string
			switch k := r.IntN(20); {
			case k < 5:
				op = fmt.Sprintf("pub p%d", p)
				payload := fmt.Sprint(npub)
				npub++
				for i, s := range sides {
					off, err := s.bt.TryPublish(p, engine.Message{Payload: payload})
					res[i] = fmt.Sprintf("%d %s", off, errClass(err))
				}
			case k < 9:
				max := int32(1 + r.IntN(2))
				op = fmt.Sprintf("poll %s/%s max %d", g, m, max)
				for i, s := range sides {
					rs, err := s.member(t, g, m).TryPoll(nil, max)
					res[i] = fmt.Sprintf("%v %s", recs(rs), errClass(err))
				}
			case k < 13:
				// Ack (or Retry) what is in flight to g's owner of p, per the engine.
				commit := r.IntN(4) != 0
				d, _ := eb.Describe("t")
				off := int64(r.IntN(4))
				for _, gd := range d.Groups {
					if gd.Group == g && gd.Partitions[p].InFlight && r.IntN(5) != 0 {
						off, m = gd.Partitions[p].Committed, gd.Partitions[p].Owner
					}
				}
				if m == "" {
					m = "a"
				}
				op = fmt.Sprintf("ack(%v) %s/%s p%d o%d", commit, g, m, p, off)
				for i, s := range sides {
					var ok bool
					var err error
					if commit {
						ok, err = s.member(t, g, m).Ack(p, off)
					} else {
						ok, err = s.member(t, g, m).Retry(p, off)
					}
					res[i] = fmt.Sprintf("%v %s", ok, errClass(err))
				}
			case k < 15:
				d, _ := eb.Describe("t")
				pd := d.Partitions[p]
				off := pd.LogStartOffset - 1 + int64(r.IntN(int(pd.LogEndOffset-pd.LogStartOffset)+3))
				if off < 0 {
					off = 0
				}
				op = fmt.Sprintf("seek %s p%d o%d", g, p, off)
				for i, s := range sides {
					ok, err := s.b.Seek("t", g, p, off)
					res[i] = fmt.Sprintf("%v %s", ok, errClass(err))
				}
			case k < 17:
				op = fmt.Sprintf("join %s/%s", g, m)
				for i, s := range sides {
					a, err := s.member(t, g, m).Join()
					res[i] = fmt.Sprintf("%v %s", a, errClass(err))
				}
			case k < 18:
				op = fmt.Sprintf("leave %s/%s", g, m)
				for i, s := range sides {
					ok, err := s.member(t, g, m).Leave()
					res[i] = fmt.Sprintf("%v %s", ok, errClass(err))
				}
			case k < 19:
				op = fmt.Sprintf("create %s", g)
				for i, s := range sides {
					ok, err := s.b.CreateGroup("t", g, engine.RoundRobin)
					res[i] = fmt.Sprintf("%v %s", ok, errClass(err))
				}
			case k == 19 && r.IntN(3) == 0:
				op = "add partition"
				for i, s := range sides {
					n, err := s.b.AddPartitions("t", 1)
					res[i] = fmt.Sprintf("%v %s", n, errClass(err))
				}
				if res[0] == res[1] && res[0] != "" && !strings.HasSuffix(res[0], "invalid") {
					parts = sides[0].bt.Partitions()
				}
			default:
				op = fmt.Sprintf("delete %s", g)
				for i, s := range sides {
					ok, err := s.b.DeleteGroup("t", g)
					res[i] = fmt.Sprintf("%v %s", ok, errClass(err))
				}
			}
			log = append(log, fmt.Sprintf("%2d %-28s -> %s", step, op, res[0]))
			if res[0] != res[1] {
				fail("step %d %s: engine %q, jetstream %q", step, op, res[0], res[1])
			}
			s0, s1 := diffState(t, sides[0]), diffState(t, sides[1])
			if !reflect.DeepEqual(s0, s1) {
				fail("after step %d %s:\nengine    %s\njetstream %s", step, op, s0, s1)
			}
		}
		jb.Close()
	}
	t.Logf("%d seeds", seeds)
}

// errClass names an error's class, for comparing two backends.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, tributary.ErrPartitionFull):
		return "full"
	case errors.Is(err, engine.ErrOffsetOutOfRange):
		return "range"
	case errors.Is(err, engine.ErrGroupNotEmpty):
		return "notempty"
	case errors.Is(err, engine.ErrInvalidArgument):
		return "invalid"
	case errors.Is(err, tributary.ErrFenced):
		return "fenced"
	case errors.Is(err, tributary.ErrClosed):
		return "closed"
	}
	return "other: " + err.Error()
}

type diffSide struct {
	name string
	b    tributary.Backend
	bt   tributary.BackendTopic
	ms   map[string]tributary.BackendMember
}

func (s *diffSide) member(t *testing.T, g, m string) tributary.BackendMember {
	k := g + "/" + m
	if x, ok := s.ms[k]; ok {
		return x
	}
	x := must(s.bt.Member(g, m)).of(t)
	s.ms[k] = x
	return x
}

// diffState is what must agree after each step: the logs, every group's
// committed offsets, in-flight flags, attempts and owners, and the
// retained records (offset, payload).
func diffState(t *testing.T, s *diffSide) string {
	snap, err := s.b.Snapshot("t")
	if err != nil {
		t.Fatalf("%s Snapshot: %v", s.name, err)
	}
	var sb strings.Builder
	for _, p := range snap.Partitions {
		fmt.Fprintf(&sb, "p%d [%d,%d) ", p.Partition, p.LogStartOffset, p.LogEndOffset)
	}
	for _, g := range snap.Groups {
		fmt.Fprintf(&sb, "| %s %v:", g.Group, g.Members)
		for _, gp := range g.Partitions {
			fmt.Fprintf(&sb, " %d:%s c%d f%v a%d l%d", gp.Partition, gp.Owner, gp.Committed, gp.InFlight, gp.Attempts, gp.Lag)
		}
	}
	for p, rs := range snap.Records {
		fmt.Fprintf(&sb, " | r%d:", p)
		for _, r := range rs {
			fmt.Fprintf(&sb, " %d=%s", r.Offset, r.Payload)
		}
	}
	return sb.String()
}
