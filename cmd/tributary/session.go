package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/jetstream"
)

// The program's error classes (docs/cli.md). Every command error wraps one of these
// or an error of the library, and is printed on one line.
var (
	errUnknownCommand = errors.New("unknown command")
	errArgs           = errors.New("wrong arguments")
	errBadEvent       = errors.New("bad event file")
	errNotOwner       = errors.New("does not own")

	// The classes the library has too are its errors, in the program's
	// words: errors.Is finds tributary.ErrNotFound in an unknown id,
	// tributary.ErrExists in a duplicate id and tributary.ErrTypeMismatch
	// in a type mismatch.
	errUnknownID    error = &classError{msg: "unknown", class: tributary.ErrNotFound}
	errDuplicateID  error = &classError{msg: "already exists", class: tributary.ErrExists}
	errTypeMismatch error = &classError{msg: "type mismatch", class: tributary.ErrTypeMismatch}
)

// classError is an error of a class (errors.Is finds it) whose message
// says what the class's own text would only repeat.
type classError struct {
	msg   string
	class error
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

// wrapClass is an error of class with the message format and a make.
func wrapClass(class error, format string, a ...any) error {
	return &classError{msg: fmt.Sprintf(format, a...), class: class}
}

// session is one cluster and the names the program gave it: topics with
// their payload types and partition names, producers and consumers.
// Consumer groups are looked up on the backend. Commands run one at a time (a parallel
// command runs its parts concurrently inside one command).
type session struct {
	c       *tributary.Cluster
	release func() // closes what the backend started (jetstream: its connection, an embedded server)
	out     io.Writer
	// now stamps produced events (Message.Time); fixed by --clock.
	now func() time.Time
	// brokerNow is the broker clock, for last-seen ages.
	brokerNow func() time.Time
	// seed seeds each Random producer (with its name); -1: unseeded.
	seed int
	// readFile reads an event file; a relative name is relative to the
	// script's directory (the working directory when interactive).
	readFile func(name string) ([]byte, error)

	topics    map[string]topicRef // the topics opened so far (topics are never deleted)
	parts     map[string][]string // topic → partition names, by index
	producers map[string]producerRef
	consumers map[string]consumerRef
}

// newSession returns a session on a new cluster with f's capacity and
// replay window, on f's backend.
func newSession(out io.Writer, readFile func(string) ([]byte, error), f sessionFlags) (*session, error) {
	c, release, err := newCluster(f)
	if err != nil {
		return nil, err
	}
	brokerNow := f.brokerNow
	if brokerNow == nil {
		brokerNow = time.Now
	}
	return &session{
		c: c, release: release, out: out, now: f.now, brokerNow: brokerNow, seed: f.seed, readFile: readFile,
		topics: map[string]topicRef{}, parts: map[string][]string{},
		producers: map[string]producerRef{}, consumers: map[string]consumerRef{},
	}, nil
}

// newCluster returns a cluster on f's backend and a function that releases
// what it started. With -backend jetstream and no -nats URL it starts an
// embedded NATS server whose store is a new temporary directory, removed
// by the release.
func newCluster(f sessionFlags) (*tributary.Cluster, func(), error) {
	if f.backend != "jetstream" {
		// Exactly the flags' options: without -session-timeout, no
		// expiry (NewCluster's default would expire a consumer that no
		// command names for 45 s).
		opts := []engine.Option{engine.WithReplayWindow(int32(f.window))}
		if f.session > 0 {
			opts = append(opts, engine.WithSessionTimeout(f.session))
		}
		if f.brokerNow != nil {
			opts = append(opts, engine.WithClock(f.brokerNow))
		}
		b, err := tributary.NewEngineBackend(int32(f.capacity), opts...)
		if err != nil {
			return nil, func() {}, err
		}
		c, err := tributary.NewClusterOn(b)
		return c, func() {}, err
	}
	cfg, stopServer, err := natsConfig(f.natsURL)
	if err != nil {
		return nil, nil, err
	}
	cfg.Capacity, cfg.ReplayWindow = int32(f.capacity), int32(f.window)
	b, err := jetstream.Open(cfg)
	if err != nil {
		stopServer()
		return nil, nil, err
	}
	release := func() {
		_ = b.Close()
		stopServer()
	}
	c, err := tributary.NewClusterOn(b)
	if err != nil {
		release()
		return nil, nil, err
	}
	return c, release, nil
}

// natsConfig returns a jetstream.Config that reaches the server of -nats
// natsURL (Config.URL) or, with natsURL "", an embedded NATS server it
// starts (Config.Server) whose store is a new temporary directory; and a
// function that shuts the embedded server down and removes its directory
// (nothing for a URL), to call once every Backend on it is closed. The
// other fields are zero, for the caller to fill.
func natsConfig(natsURL string) (jetstream.Config, func(), error) {
	if natsURL != "" {
		return jetstream.Config{URL: natsURL}, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "tributary-nats-")
	if err != nil {
		return jetstream.Config{}, nil, err
	}
	srv, err := jetstream.StartServer(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return jetstream.Config{}, nil, fmt.Errorf("starting an embedded NATS server: %w", err)
	}
	return jetstream.Config{Server: srv}, func() {
		srv.Shutdown()
		_ = os.RemoveAll(dir)
	}, nil
}

// close closes every consumer and producer and the cluster, then what its
// backend started.
func (s *session) close() error {
	err := s.c.Close()
	s.release()
	return err
}

// consumerOpts are the options of `create consumer`.
type consumerOpts struct {
	deadLetter  string
	maxAttempts int32
}

// ---- lookups: each error names what was asked for and what exists ----
//
// Producers and consumers live in this process: the session knows every
// one. Topics and consumer groups live on the backend, which other
// processes may share (-backend jetstream -nats URL): a topic or group the
// session did not make is looked up there, as kafka-topics and
// kafka-consumer-groups find what any client created. On the in-memory
// backend the session made everything the backend holds.

// topic returns the topic name: one the session has a handle on, else the
// backend's topic of that name, opened with the program's kind of its
// payload type (foreignKind for a payload type the program has no kind
// for). An unknown topic is an error listing the backend's topics.
func (s *session) topic(name string) (topicRef, error) {
	t, ok, err := s.lookupTopic(name)
	if err != nil || ok {
		return t, err
	}
	return nil, fmt.Errorf("%w topic %s (topics: %s)", errUnknownID, quote(name), list(s.c.Topics()))
}

// lookupTopic is topic, answering false (and no error) for a topic the
// backend does not have or a name that is no identifier. Errors: the
// backend's (ErrUnavailable).
func (s *session) lookupTopic(name string) (topicRef, bool, error) {
	if t, ok := s.topics[name]; ok {
		return t, true, nil
	}
	if engine.CheckIdentifier("topic", name) != nil {
		return nil, false, nil
	}
	_, pt, err := s.c.Backend().OpenTopic(name)
	if errors.Is(err, tributary.ErrUnknownTopic) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	t, err := kindOf(pt).openTopic(s, name)
	if err != nil {
		return nil, false, err
	}
	s.addTopic(t)
	return t, true, nil
}

func (s *session) producer(name string) (producerRef, error) {
	if p, ok := s.producers[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w producer %s (producers: %s)", errUnknownID, quote(name), list(keys(s.producers)))
}

func (s *session) consumer(name string) (consumerRef, error) {
	if c, ok := s.consumers[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w consumer %s (consumers: %s)", errUnknownID, quote(name), list(keys(s.consumers)))
}

// group returns the topic of consumer group name, whichever process
// created it: the topic given (a command's --topic, "" for none), which
// must have the group, or else the one topic of the backend that has a
// group of that name. A group is unknown when no topic has it, and
// ambiguous when several have one of that name (the library's groups are
// per topic): then --topic says which.
func (s *session) group(name, topic string) (string, error) {
	if topic != "" {
		if _, err := s.topic(topic); err != nil {
			return "", err
		}
		ok, err := s.hasGroup(topic, name)
		if err != nil {
			return "", err
		}
		if !ok {
			d, err := s.c.Describe(topic)
			if err != nil {
				return "", err
			}
			return "", fmt.Errorf("%w consumer group %s on topic %s (its groups: %s)", errUnknownID, quote(name), quote(topic), list(groupsOf(d)))
		}
		return topic, nil
	}
	topics, err := s.groupTopics(name)
	if err != nil {
		return "", err
	}
	switch len(topics) {
	case 0:
		return "", s.unknownGroup(name)
	case 1:
		return topics[0], nil
	}
	return "", fmt.Errorf("%w: consumer group %s is on %s: give --topic <topic>", errArgs, quote(name), topicsPhrase(topics))
}

// groupTopics returns the backend's topics that have a consumer group
// named name, sorted; none for a name that is no identifier.
func (s *session) groupTopics(name string) ([]string, error) {
	if engine.CheckIdentifier("group", name) != nil {
		return nil, nil
	}
	var out []string
	for _, t := range s.c.Topics() {
		ok, err := s.hasGroup(t, name)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// hasGroup reports whether topic has a consumer group named group.
func (s *session) hasGroup(topic, group string) (bool, error) {
	if engine.CheckIdentifier("group", group) != nil {
		return false, nil
	}
	_, ok, err := s.c.GroupConfig(topic, group)
	return ok, err
}

// unknownGroup is the error for a group no topic has, listing the groups
// of every topic of the backend.
func (s *session) unknownGroup(name string) error {
	seen := map[string]bool{}
	var all []string
	for _, t := range s.c.Topics() {
		d, err := s.c.Describe(t)
		if err != nil {
			return err
		}
		for _, g := range groupsOf(d) {
			if !seen[g] {
				seen[g] = true
				all = append(all, g)
			}
		}
	}
	slices.Sort(all)
	return fmt.Errorf("%w consumer group %s (groups: %s)", errUnknownID, quote(name), list(all))
}

// groupsOf is the names of d's groups, in d's order.
func groupsOf(d engine.TopicDescription) []string {
	names := make([]string, len(d.Groups))
	for i, g := range d.Groups {
		names[i] = g.Group
	}
	return names
}

// partNames returns topic's partition names by index: those the session
// gave (p0, p1, … and the names given to create partition), then p<i> for
// partitions it did not add (another process's AddPartitions).
func (s *session) partNames(topic string) []string {
	names := s.parts[topic]
	if t, ok := s.topics[topic]; ok {
		for i := len(names); i < int(t.Partitions()); i++ {
			names = append(names, "p"+strconv.Itoa(i))
		}
		s.parts[topic] = names
	}
	return names
}

// partition resolves a partition of topic by name (p0, or a name given to
// `create partition`) or by index.
func (s *session) partition(topic, arg string) (int32, error) {
	names := s.partNames(topic)
	if i := slices.Index(names, arg); i >= 0 {
		return int32(i), nil
	}
	if i, err := strconv.Atoi(arg); err == nil && isNumber(arg) && i < len(names) {
		return int32(i), nil
	}
	return 0, fmt.Errorf("%w partition %s of topic %s (partitions: %s, or an index 0..%d)", errUnknownID, quote(arg), quote(topic), strings.Join(names, " "), len(names)-1)
}

// partName is the name of partition p of topic.
func (s *session) partName(topic string, p int32) string {
	if names := s.parts[topic]; int(p) < len(names) {
		return names[p]
	}
	return "p" + strconv.Itoa(int(p))
}

// partList is the names of partitions ps of topic, space-separated.
func (s *session) partList(topic string, ps []int32) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = s.partName(topic, p)
	}
	return strings.Join(names, " ")
}

// addTopic registers t with default partition names p0, p1, ….
func (s *session) addTopic(t topicRef) {
	s.topics[t.Name()] = t
	names := make([]string, t.Partitions())
	for i := range names {
		names[i] = "p" + strconv.Itoa(i)
	}
	s.parts[t.Name()] = names
}

// describeGroup returns group's description on topic from one snapshot of
// the topic.
func (s *session) describeGroup(topic, group string) (engine.GroupDescription, engine.TopicDescription, error) {
	d, err := s.c.Describe(topic)
	if err != nil {
		return engine.GroupDescription{}, d, err
	}
	for _, g := range d.Groups {
		if g.Group == group {
			return g, d, nil
		}
	}
	return engine.GroupDescription{}, d, fmt.Errorf("%w consumer group %s: gone from topic %s", errUnknownID, quote(group), quote(topic))
}

// assignmentLine is group's assignor and members with their partitions,
// e.g. "billing (Range): c1 [p0 p1] c2 [p2]".
func (s *session) assignmentLine(topic, group string) (string, error) {
	g, d, err := s.describeGroup(topic, group)
	if err != nil {
		return "", err
	}
	owner := make([]string, len(g.Partitions))
	for i, gp := range g.Partitions {
		owner[i] = gp.Owner
	}
	return s.ownersLine(d.Topic, group, g.Assignor, g.Members, owner), nil
}

// ownersLine is an assignment line, "billing (Range): c1 [p0 p1] c2 [p2]":
// group, its assignor's name, and each of members (in order) with the
// partitions p of topic whose owner[p] it is.
func (s *session) ownersLine(topic, group, assignor string, members, owner []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", group, assignor)
	if len(members) == 0 {
		b.WriteString(" no members")
	}
	for _, m := range members {
		var ps []int32
		for p, o := range owner {
			if o == m {
				ps = append(ps, int32(p))
			}
		}
		fmt.Fprintf(&b, " %s [%s]", m, s.partList(topic, ps))
	}
	return b.String()
}

// ---- parsing helpers ----

// assignors are the built-in assignors the program offers, each named by
// its Name() ("RoundRobin", "Range", "Sticky"): the word a command takes
// and the word every output prints.
var assignors = []engine.Assignor{engine.RoundRobin, engine.Range, engine.Sticky}

func parseAssignor(name string) (engine.Assignor, error) {
	for _, a := range assignors {
		if a.Name() == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w: assignor %s: want RoundRobin, Range or Sticky", errArgs, quote(name))
}

func parsePayloadType(name string) (payloadKind, error) {
	if k, ok := payloadKinds[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: payload type %s: want Integer, String or JSON", errArgs, quote(name))
}

// isNumber reports whether arg is a whole number written plainly: digits,
// no sign, no leading zero (so "064" and "+1" are not numbers).
func isNumber(arg string) bool {
	if arg == "" || (len(arg) > 1 && arg[0] == '0') {
		return false
	}
	for _, r := range arg {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseCount parses a whole number in lo..hi for what.
func parseCount(what, arg string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(arg)
	if err != nil || !isNumber(arg) || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s %s: want a whole number in %d..%d", errArgs, what, quote(arg), lo, hi)
	}
	return n, nil
}

// readEvent reads and checks an event file: a JSON object with "value" and
// optional "key" (a string) and "headers" (an object of strings). Other
// fields, a field given twice and null where a string is wanted are
// refused, so that a misspelt "value" is not read as absent.
func (s *session) readEvent(name string) (event, error) {
	b, err := s.readFile(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return event{}, fmt.Errorf("%w %s: %v", errBadEvent, clipped(name), err)
	}
	if err := checkText(b); err != nil {
		return event{}, fmt.Errorf("%w %s: %v", errBadEvent, clipped(name), err)
	}
	fields, err := jsonObject(b)
	if err != nil {
		return event{}, fmt.Errorf("%w %s: %v (want {\"key\": \"...\", \"headers\": {\"name\": \"value\"}, \"value\": ...})", errBadEvent, clipped(name), err)
	}
	bad := func(format string, a ...any) (event, error) {
		return event{}, fmt.Errorf("%w %s: %s (want {\"key\": \"...\", \"headers\": {\"name\": \"value\"}, \"value\": ...})", errBadEvent, clipped(name), fmt.Sprintf(format, a...))
	}
	var ev event
	for _, f := range fields {
		switch f.name {
		case "key":
			if ev.Key, err = jsonString(f.value); err != nil {
				return bad("\"key\" is %v", err)
			}
		case "headers":
			hs, err := jsonObject(f.value)
			if err != nil {
				return bad("\"headers\": %v", err)
			}
			for _, h := range hs {
				v, err := jsonString(h.value)
				if err != nil {
					return bad("header %s is %v", quote(h.name), err)
				}
				ev.Headers = append(ev.Headers, tributary.Header{Key: h.name, Value: v})
			}
			slices.SortFunc(ev.Headers, func(x, y tributary.Header) int { return strings.Compare(x.Key, y.Key) })
		case "value":
			ev.Value = f.value
		default:
			return bad("unknown field %s", quote(f.name))
		}
	}
	if ev.Value == nil {
		return bad("no \"value\"")
	}
	return ev, nil
}

// checkText refuses what encoding/json would silently turn into U+FFFD:
// bytes that are not UTF-8, and a \u escape of half a UTF-16 surrogate
// pair (\ud800 without the \udc00..\udfff escape that completes it, or
// the second half alone). The error names the line and column (in bytes,
// from 1) of the first one.
func checkText(b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		line, col := position(b, i)
		return fmt.Errorf("byte 0x%02x at line %d, column %d is not UTF-8 (an event file is UTF-8 text)", b[i], line, col)
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(b):
			if b[i+1] != 'u' {
				i++ // a one-character escape: \" \\ \/ \b \f \n \r \t
				continue
			}
			r, ok := hex4(b[i+2:])
			if !ok {
				continue // not an escape: the JSON reader refuses it
			}
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(0), false
				if len(b) >= i+12 && b[i+6] == '\\' && b[i+7] == 'u' {
					r2, ok2 = hex4(b[i+8:])
				}
				if r >= 0xdc00 || !ok2 || utf16.DecodeRune(r, r2) == utf8.RuneError {
					line, col := position(b, i)
					return fmt.Errorf("%s at line %d, column %d is half a UTF-16 surrogate pair, not a character", b[i:i+6], line, col)
				}
				i += 6
			}
			i += 5
		}
	}
	return nil
}

// hex4 reads the four hex digits at the start of b as a rune.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(n), err == nil
}

// position is the line and column, both from 1 and the column in bytes, of
// offset i of b.
func position(b []byte, i int) (line, col int) {
	line = 1 + bytes.Count(b[:i], []byte("\n"))
	return line, i - bytes.LastIndexByte(b[:i], '\n')
}

// field is one member of a JSON object, in order.
type field struct {
	name  string
	value json.RawMessage
}

// jsonErr is the text of encoding/json's err, cut like clipped:
// encoding/json repeats a literal it cannot take whole ("cannot unmarshal
// number 4444…"), and the program's errors stay one short line.
func jsonErr(err error) string { return clipped(err.Error()) }

// jsonObject reads b as one JSON object, refusing a name given twice and
// anything after the object.
func jsonObject(b []byte) ([]field, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		if err == nil || err == io.EOF {
			return nil, errors.New("not a JSON object")
		}
		return nil, fmt.Errorf("not a JSON object: %s", jsonErr(err))
	}
	var out []field
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("not valid JSON: %s", jsonErr(err))
		}
		name, _ := t.(string)
		for _, f := range out {
			if f.name == name {
				return nil, fmt.Errorf("field %s given twice", quote(name))
			}
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("not valid JSON: %s", jsonErr(err))
		}
		out = append(out, field{name, v})
	}
	if _, err := d.Token(); err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", jsonErr(err))
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more after the JSON object")
	}
	return out, nil
}

// jsonString reads raw as a JSON string (not null).
func jsonString(raw json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil || s == nil {
		return "", fmt.Errorf("%s, not a string", clipped(string(raw)))
	}
	return *s, nil
}

// ---- small helpers ----

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " ")
}

// ctx is the context of one command.
func (s *session) ctx() context.Context { return context.Background() }
