package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	njs "github.com/nats-io/nats.go/jetstream"
)

// The state stream as a key-value store with compare-and-set. Key k is the
// subject <sp>.state.<k>; the stream keeps one message per subject, and a
// key's revision is that message's stream sequence (0: never written). Reads
// go to the stream leader (direct gets only with Replicas 1, where the one
// server is the leader: ensureStream), so a read sees every write
// acknowledged before it started. A deleted key holds a tombstone; its
// revision is kept, so re-creating it is a compare-and-set like any other.

// tombstone is the value of a deleted key. A deleted cursor's tombstone
// also records the incarnation it deleted (cursorTomb): placing a cursor
// of that incarnation or an older one is refused.
var tombstone = []byte(`{"deleted":true}`)

// cursorTomb is the tombstone of a cursor deleted with its group's
// incarnation Inc: {"deleted":true,"inc":Inc}.
type cursorTomb struct {
	Deleted bool   `json:"deleted"`
	Inc     uint64 `json:"inc,omitempty"`
}

// isTombstone reports whether data is a tombstone (plain or a cursor's).
func isTombstone(data []byte) bool {
	return bytes.Equal(data, tombstone) || bytes.HasPrefix(data, []byte(`{"deleted":true,`))
}

// topicVal is the value of key topic.<T>.
type topicVal struct {
	Partitions  int32  `json:"partitions"`
	PayloadType string `json:"payloadType"`
	Window      int32  `json:"window,omitempty"` // replay window, records (rule 21); fixed at creation
}

// groupVal is the value of key group.<T>.<G>.
type groupVal struct {
	// Inc is the group's incarnation: the revision of the write that
	// created it. That write stores 0 (it cannot know its own revision);
	// readGroup fills it in and later writes carry it.
	Inc      uint64   `json:"inc,omitempty"`
	Gen      uint64   `json:"gen"`      // generation, +1 per rebalance
	Assignor string   `json:"assignor"` // the assignor's Name
	Members  []string `json:"members"`  // sorted bytewise
	Owners   []string `json:"owners"`   // Owners[p]: owner of p, "" for none; len = partitions seen by the last rebalance
	Since    []uint64 `json:"since"`    // Since[p]: the generation at which Owners[p] became p's owner
	// Incs[m] is member m's current incarnation: the token of the Member
	// that last joined or rejoined as m (any process). A Member that has
	// joined and finds another token here, or finds itself removed, is
	// superseded (fenced). Absent for a member a writer without
	// incarnations added: then nothing is fenced.
	Incs map[string]string `json:"incs,omitempty"`
	groupConfig
}

// groupConfig is the part of a groupVal that CreateGroup writes and no
// later write changes: the group's tributary.GroupConfig. A group a Join
// created has the zero value. Its fields are the group key's own in JSON.
type groupConfig struct {
	// Latest, set by a group created with engine.StartLatest, places the
	// group's cursor on each partition below Parts (the partition count at
	// its creation) at the log end when the cursor is first placed: by
	// CreateGroup itself before it returns, or by whichever process first
	// reads the cursor if CreateGroup's process did not get that far.
	// Partitions added later start at 0 (SPEC rule 19).
	Latest bool  `json:"latest,omitempty"`
	Parts  int32 `json:"parts,omitempty"`
	// The failure policy: GroupConfig's fields of the same names.
	DeadLetter  string        `json:"deadLetter,omitempty"`
	MaxAttempts int32         `json:"maxAttempts,omitempty"`
	Backoff     time.Duration `json:"backoff,omitempty"`    // nanoseconds
	MaxBackoff  time.Duration `json:"maxBackoff,omitempty"` // nanoseconds
}

// newGroupConfig is the stored form of c for a topic of parts partitions.
func newGroupConfig(c tributary.GroupConfig, parts int32) groupConfig {
	g := groupConfig{DeadLetter: c.DeadLetter, MaxAttempts: c.MaxAttempts, Backoff: c.Backoff, MaxBackoff: c.MaxBackoff}
	if c.Start == engine.StartLatest {
		g.Latest, g.Parts = true, parts
	}
	return g
}

// config returns g as a tributary.GroupConfig.
func (g groupConfig) config() tributary.GroupConfig {
	c := tributary.GroupConfig{DeadLetter: g.DeadLetter, MaxAttempts: g.MaxAttempts, Backoff: g.Backoff, MaxBackoff: g.MaxBackoff}
	if g.Latest {
		c.Start = engine.StartLatest
	}
	return c
}

// startsLatest reports whether the group's cursor on p starts at the log
// end (a StartLatest group, p one of its first partitions).
func (g groupConfig) startsLatest(p int32) bool { return g.Latest && p < g.Parts }

// owner returns the owner of p, "" when none or p is beyond Owners.
func (g *groupVal) owner(p int32) string {
	if int(p) < len(g.Owners) {
		return g.Owners[p]
	}
	return ""
}

// since returns the generation at which p's owner last changed.
func (g *groupVal) since(p int32) uint64 {
	if int(p) < len(g.Since) {
		return g.Since[p]
	}
	return g.Gen
}

// setInc makes inc member m's incarnation in g, on a copy of g's Incs (a
// groupVal copied by value shares the map with its original).
func (g *groupVal) setInc(m, inc string) {
	incs := maps.Clone(g.Incs)
	if incs == nil {
		incs = map[string]string{}
	}
	incs[m] = inc
	g.Incs = incs
}

// isMember reports whether m is a member.
func (g *groupVal) isMember(m string) bool {
	for _, x := range g.Members {
		if x == m {
			return true
		}
	}
	return false
}

// cursorVal is the value of key cursor.<T>.<G>.<p>: one group's position on
// one partition.
type cursorVal struct {
	Inc         uint64 `json:"inc"`   // the group incarnation it belongs to
	Owner       string `json:"owner"` // the owner it was last migrated to
	Gen         uint64 `json:"gen"`   // the group generation it was last migrated to
	Committed   int64  `json:"committed"`
	InFlight    bool   `json:"inFlight,omitempty"`
	Attempts    int32  `json:"attempts,omitempty"`
	DeliveredAt int64  `json:"deliveredAt,omitempty"` // broker clock, Unix ns, of the in-flight delivery
	// MemberInc is the incarnation (groupVal.Incs) that the in-flight
	// delivery was made to; meaningful only while InFlight. A delivery of
	// a superseded incarnation is its successor's to take again, never to
	// ack (SPEC rule 25).
	MemberInc string `json:"minc,omitempty"`
}

// lowVal is the value of key low.<T>.<p>: the partition's log start offset,
// the retention fence. Evict, when not 0, is the log end at which a
// publish that found the partition full raised Low by one (eviction): the
// raise takes effect in the model's order only with the publish that fills
// the room it made, so readLow returns it once the log end has passed
// Evict (package doc). Holds are the Seeks under way on the partition:
// Holds[token] is the instant (the holder's clock, Unix ns) at which a
// Seek's hold expires; no retention pass raises Low while a hold is
// active (Backend.Seek, package doc "Seek holds").
type lowVal struct {
	Low   int64            `json:"low"`
	Evict int64            `json:"evict,omitempty"`
	Holds map[string]int64 `json:"holds,omitempty"`
}

// held reports whether lv has a hold active at now (Unix ns) that is not
// in ignore (holds a waiter gave up on: holdWait).
func (lv lowVal) held(now int64, ignore map[string]bool) bool {
	for tok, until := range lv.Holds {
		if now < until && !ignore[tok] {
			return true
		}
	}
	return false
}

// withHold returns lv with the hold tok until until added and the holds
// expired at now or in ignore dropped, on a copy of its Holds.
func (lv lowVal) withHold(tok string, until, now int64, ignore map[string]bool) lowVal {
	holds := map[string]int64{tok: until}
	for x, u := range lv.Holds {
		if now < u && !ignore[x] {
			holds[x] = u
		}
	}
	lv.Holds = holds
	return lv
}

// withoutHold returns lv without the hold tok, on a copy of its Holds.
func (lv lowVal) withoutHold(tok string) lowVal {
	holds := maps.Clone(lv.Holds)
	delete(holds, tok)
	if len(holds) == 0 {
		holds = nil
	}
	lv.Holds = holds
	return lv
}

// seenVal is the value of key seen.<T>.<G>: the last-seen instants
// (broker clock, Unix ns) of the members of incarnation Inc of a group
// (SPEC rule 24). A member without one is never expired.
type seenVal struct {
	Inc  uint64           `json:"inc"`
	Seen map[string]int64 `json:"seen"`
}

func seenKey(t, g string) string      { return "seen." + t + "." + g }
func topicKey(t string) string        { return "topic." + t }
func groupKey(t, g string) string     { return "group." + t + "." + g }
func lowKey(t string, p int32) string { return "low." + t + "." + strconv.Itoa(int(p)) }
func cursorKey(t, g string, p int32) string {
	return "cursor." + t + "." + g + "." + strconv.Itoa(int(p))
}

// Key patterns (* one token), for listKeys, snapshot reads and wake-ups:
// every group of topic t; low of each partition of t; group g's cursor on
// each partition; every group's cursor on partition p.
func groupsKey(t string) string          { return "group." + t + ".*" }
func lowsKey(t string) string            { return "low." + t + ".*" }
func groupCursorsKey(t, g string) string { return "cursor." + t + "." + g + ".*" }
func partCursorsKey(t string, p int32) string {
	return "cursor." + t + ".*." + strconv.Itoa(int(p))
}

// stateSubject returns key's subject.
func (b *Backend) stateSubject(key string) string { return b.sp + ".state." + key }

// get reads key into v and returns its revision; ok is false (v untouched)
// when the key was never written or is deleted.
func (b *Backend) get(key string, v any) (rev uint64, ok bool, err error) {
	rev, ok, _, err = b.getTomb(key, v)
	return rev, ok, err
}

// getIn is get from s when s holds key (nil s: get).
func (b *Backend) getIn(s *snapshot, key string, v any) (rev uint64, ok bool, err error) {
	if rev, ok, covered, err := s.get(key, v); covered {
		return rev, ok, err
	}
	return b.get(key, v)
}

// getTomb is get that also returns, for a deleted cursor, the incarnation
// its tombstone records (0: none recorded, or the key is not deleted).
func (b *Backend) getTomb(key string, v any) (rev uint64, ok bool, dead uint64, err error) {
	if h := b.reading; h != nil {
		h(key)
	}
	ctx, cancel := b.ctx()
	defer cancel()
	m, err := b.state.GetLastMsgForSubject(ctx, b.stateSubject(key))
	if errors.Is(err, njs.ErrMsgNotFound) {
		return 0, false, 0, nil
	}
	if err != nil {
		return 0, false, 0, b.fail(fmt.Errorf("reading %s: %w", key, err))
	}
	return decodeState(&b.cache, key, m.Sequence, m.Data, v)
}

// decodeState decodes key's message (revision rev, value data) into v, as
// getTomb returns it, through sc (nil: none), which skips encoding/json
// for a value it decoded or wrote before (statecache.go).
func decodeState(sc *stateCache, key string, rev uint64, data []byte, v any) (uint64, bool, uint64, error) {
	if isTombstone(data) {
		var t cursorTomb
		if err := json.Unmarshal(data, &t); err != nil {
			return 0, false, 0, fmt.Errorf("tributary/jetstream: corrupt state %s: %w", key, err)
		}
		return rev, false, t.Inc, nil
	}
	if err := sc.decode(key, data, v); err != nil {
		return 0, false, 0, fmt.Errorf("tributary/jetstream: corrupt state %s: %w", key, err)
	}
	return rev, true, 0, nil
}

// put writes v (nil: a tombstone; a cursorTomb is one too) to key if its
// revision is still rev (0: never written) and returns the new revision;
// ok is false, nothing written, when the revision has moved on.
func (b *Backend) put(key string, v any, rev uint64) (newRev uint64, ok bool, err error) {
	data := tombstone
	if v != nil {
		if data, err = json.Marshal(v); err != nil {
			return 0, false, err
		}
	}
	ctx, cancel := b.ctx()
	defer cancel()
	if h := b.lossy; h != nil && h(key, false) {
		return 0, false, b.fail(fmt.Errorf("writing %s: %w", key, context.DeadlineExceeded))
	}
	ack, err := b.js.Publish(ctx, b.stateSubject(key), data, njs.WithExpectLastSequencePerSubject(rev))
	switch code := apiCode(err); {
	case err == nil:
		if h := b.lossy; h != nil && h(key, true) {
			return 0, false, b.fail(fmt.Errorf("writing %s: reply: %w", key, context.DeadlineExceeded))
		}
		b.cache.wrote(key, data, v)
		return ack.Sequence, true, nil
	case code == njs.JSErrCodeStreamWrongLastSequence || code == njs.JSErrCodeStreamWrongLastSequenceConstant:
		return 0, false, nil
	default:
		return 0, false, b.fail(fmt.Errorf("writing %s: %w", key, err))
	}
}

// readGroup reads group g of topic t, its incarnation filled in.
func (b *Backend) readGroup(t, g string) (gv groupVal, rev uint64, ok bool, err error) {
	return b.readGroupIn(nil, t, g)
}

// readGroupIn is readGroup from s when s holds the group's key.
func (b *Backend) readGroupIn(s *snapshot, t, g string) (gv groupVal, rev uint64, ok bool, err error) {
	rev, ok, err = b.getIn(s, groupKey(t, g), &gv)
	if ok && gv.Inc == 0 {
		gv.Inc = rev
	}
	return gv, rev, ok, err
}

// readLow reads partition p's log start.
//
// If the value records an eviction whose publish has not landed yet (the
// log end is still lowVal.Evict), it waits for it, then reads low again:
// between an eviction's raise of low and its publish, the partition is in
// a state no sequential order has (log start raised, log end not), and no
// reader may act on it (package doc). A publish lands within a request;
// one that never comes (its publisher failed or died) is waited for at
// most fallbackWait, and the raise then counts as done.
func (b *Backend) readLow(t string, p int32) (lowVal, uint64, error) {
	return b.readLowIn(nil, t, p)
}

// readLowIn is readLow whose first read of low is from s when s holds it.
func (b *Backend) readLowIn(s *snapshot, t string, p int32) (lowVal, uint64, error) {
	var deadline time.Time
	for ; ; s = nil {
		var lv lowVal
		rev, _, err := b.getIn(s, lowKey(t, p), &lv)
		if err != nil || lv.Evict == 0 {
			return lv, rev, err
		}
		name := b.partName(t, p)
		if v, ok := b.landed.Load(name); ok && v.(int64) >= lv.Evict {
			return lv, rev, nil
		}
		end, err := b.logEnd(t, p)
		if err != nil {
			return lv, rev, err
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(fallbackWait)
		}
		if end > lv.Evict || now.After(deadline) {
			b.markLanded(name, lv.Evict)
			return lv, rev, nil
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// markLanded records that partition stream name's log end has passed e.
func (b *Backend) markLanded(name string, e int64) {
	for {
		v, loaded := b.landed.LoadOrStore(name, e)
		if !loaded || v.(int64) >= e || b.landed.CompareAndSwap(name, v, e) {
			return
		}
	}
}
