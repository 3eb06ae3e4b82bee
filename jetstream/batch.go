package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// A snapshot is several state keys read at one instant by one request: a
// direct get of the state stream's last message per subject for a list of
// subjects and wildcards (the server's multi_last, answered under the
// stream's read isolation, so no write falls between two of its keys).
// Poll, Ack, Retry and a retention pass take one instead of reading the
// group, the cursors and low one request each; a read set is as good as
// those reads made one after another with no time between (each is a
// value the key held at that instant), so every protocol argument of the
// package doc stands. Only on a state stream with direct gets (Replicas
// 1: ensureStream); elsewhere, or on a server that refuses the request
// (before nats-server 2.11), the callers read key by key.
type snapshot struct {
	covers []string              // the keys and patterns read
	vals   map[string]stateEntry // key → its message; absent: never written
	cache  *stateCache           // the reader's: decodes its values
}

// stateEntry is one key's message in a snapshot: its revision and value.
type stateEntry struct {
	rev  uint64
	data []byte
}

// errNoSnapshot: the state stream cannot take multi_last reads; read key
// by key.
var errNoSnapshot = errors.New("no snapshot reads")

// read returns a snapshot of keys (exact keys or patterns with * for one
// token). errNoSnapshot when snapshots are not available (the caller
// reads key by key); ErrUnavailable and the like as get.
func (b *Backend) read(keys ...string) (*snapshot, error) {
	if !b.snapshots.Load() {
		return nil, errNoSnapshot
	}
	// No batch size: the server answers every key or, past its limit of
	// 1,024, refuses with 413 (a batch size would cut the answer short
	// and leave the keys beyond it looking never written).
	req := b.multiLast(keys)
	msgs, err := b.snaps.request(b, "$JS.API.DIRECT.GET."+b.cfg.Prefix+"_STATE", req, len(keys))
	if err != nil {
		return nil, b.fail(fmt.Errorf("reading %v: %w", keys, err))
	}
	s := &snapshot{covers: keys, vals: make(map[string]stateEntry, len(keys)), cache: &b.cache}
	prefix := b.stateSubject("")
	for _, m := range msgs {
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			if np := m.Header.Get("Nats-Num-Pending"); np != "" && np != "0" {
				// Cut short (the server's byte limit): the keys not sent
				// would look never written.
				return nil, errNoSnapshot
			}
			return s, nil
		case "404":
			if m.Header.Get("Description") == "No Results" {
				return s, nil // none of the keys was ever written
			}
			return nil, errNoSnapshot // a message that failed to load
		case "503":
			return nil, b.fail(fmt.Errorf("reading %v: %w", keys, nats.ErrNoResponders))
		case "400", "408", "412":
			// A request the server does not understand (before
			// nats-server 2.11: no multi_last): key by key from now on.
			b.snapshots.Store(false)
			return nil, errNoSnapshot
		default: // 413 (over 1,024 keys), 500: key by key this time
			return nil, errNoSnapshot
		}
		subj, seq := m.Header.Get(njs.SubjectHeader), m.Header.Get(njs.SequenceHeader)
		rev, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || !strings.HasPrefix(subj, prefix) {
			return nil, fmt.Errorf("tributary/jetstream: malformed snapshot answer (subject %q, sequence %q)", subj, seq)
		}
		s.vals[subj[len(prefix):]] = stateEntry{rev: rev, data: m.Data}
	}
	return nil, fmt.Errorf("tributary/jetstream: snapshot answer of %d messages without its end", len(msgs))
}

// multiLast returns the request of a snapshot read of keys: the bytes
// json.Marshal gives {"multi_last":[subject, ...]} (the keys' subjects),
// built without reflection and without a string per subject.
func (b *Backend) multiLast(keys []string) []byte {
	head := b.stateSubject("")
	n := len(`{"multi_last":[]}`)
	for _, k := range keys {
		n += len(head) + len(k) + 3 // quotes and comma
	}
	req := make([]byte, 0, n)
	req = append(req, `{"multi_last":[`...)
	for i, k := range keys {
		if i > 0 {
			req = append(req, ',')
		}
		if plainJSON(head) && plainJSON(k) {
			req = append(req, '"')
			req = append(req, head...)
			req = append(req, k...)
			req = append(req, '"')
			continue
		}
		q, _ := json.Marshal(head + k) // a string always encodes
		req = append(req, q...)
	}
	return append(req, "]}"...)
}

// plainJSON reports whether json.Marshal writes s between quotes as it
// is: printable ASCII other than the characters it escapes (" \ < > &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// snapReplies routes the answers of snapshot reads: one subscription per
// Backend, on a wildcard inbox made at the first read, each read's answer
// on a subject of its own under it. An answer is several messages (one
// per key, then the end of batch).
type snapReplies struct {
	once   sync.Once
	prefix string // the inbox, "." included
	err    error  // subscribing failed

	// mu guards next (the last request's number) and waiting (subject
	// token → the read waiting for that answer).
	mu      sync.Mutex
	next    uint64
	waiting map[string]*snapWait
}

// snapWait is one read's answer so far; done is closed at its end.
type snapWait struct {
	msgs []*nats.Msg
	done chan struct{}
}

// request sends req to subject and returns the answer's messages, its end
// included, or ctx's error (the Backend's RequestTimeout). n is the
// number of messages expected before the end (a capacity hint).
func (r *snapReplies) request(b *Backend, subject string, req []byte, n int) ([]*nats.Msg, error) {
	r.once.Do(func() {
		r.prefix = b.nc.NewRespInbox() + "."
		r.waiting = map[string]*snapWait{}
		_, r.err = b.nc.Subscribe(r.prefix+"*", r.deliver)
	})
	if r.err != nil {
		return nil, r.err
	}
	w := &snapWait{msgs: make([]*nats.Msg, 0, n+1), done: make(chan struct{})}
	r.mu.Lock()
	r.next++
	token := strconv.FormatUint(r.next, 36)
	r.waiting[token] = w
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, token)
		r.mu.Unlock()
	}()
	if err := b.nc.PublishRequest(subject, r.prefix+token, req); err != nil {
		return nil, err
	}
	ctx, cancel := b.ctx()
	defer cancel()
	select {
	case <-w.done:
		return w.msgs, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.closed:
		return nil, nats.ErrConnectionClosed
	}
}

// deliver adds m to the answer it belongs to; a status message (the end
// of batch, or an error) ends it.
func (r *snapReplies) deliver(m *nats.Msg) {
	token := strings.TrimPrefix(m.Subject, r.prefix)
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.waiting[token]
	if w == nil {
		return // a read that gave up
	}
	w.msgs = append(w.msgs, m)
	if m.Header.Get("Status") != "" {
		delete(r.waiting, token)
		close(w.done)
	}
}

// get is Backend.get from the snapshot: rev, ok and v as get would have
// read them at the snapshot's instant. covered is false when key is not
// one of the snapshot's keys or patterns (the caller reads it itself).
func (s *snapshot) get(key string, v any) (rev uint64, ok, covered bool, err error) {
	if s == nil || !s.covered(key) {
		return 0, false, false, nil
	}
	e, found := s.vals[key]
	if !found {
		return 0, false, true, nil
	}
	rev, ok, _, err = decodeState(s.cache, key, e.rev, e.data, v)
	return rev, ok, true, err
}

// unchanged reports whether rev is key's revision in s: a value read
// from s, not written since by the caller. A caller that wrote the key
// (a migration, a placement) reads what it compares with afresh.
func (s *snapshot) unchanged(key string, rev uint64) bool {
	if s == nil || !s.covered(key) {
		return false
	}
	return s.vals[key].rev == rev
}

// covered reports whether key is one of s's keys or matches one of its
// patterns.
func (s *snapshot) covered(key string) bool {
	for _, c := range s.covers {
		if c == key || matchKey(c, key) {
			return true
		}
	}
	return false
}

// matchKey reports whether key matches pattern, token by token (. the
// separator, * any one token).
func matchKey(pattern, key string) bool {
	for {
		pi, ki := strings.IndexByte(pattern, '.'), strings.IndexByte(key, '.')
		if (pi < 0) != (ki < 0) {
			return false
		}
		pt, kt := pattern, key
		if pi >= 0 {
			pt, kt = pattern[:pi], key[:ki]
		}
		if pt != "*" && pt != kt {
			return false
		}
		if pi < 0 {
			return true
		}
		pattern, key = pattern[pi+1:], key[ki+1:]
	}
}

// keys returns the snapshot's keys that match pattern.
func (s *snapshot) keys(pattern string) []string {
	var out []string
	for k := range s.vals {
		if matchKey(pattern, k) {
			out = append(out, k)
		}
	}
	return out
}
