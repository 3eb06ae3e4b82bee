package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/shlex"
	"golang.org/x/sync/errgroup"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// command is one command of the program (docs/cli.md).
type command struct {
	words    []string        // the command's keywords, e.g. create topic
	usage    string          // its arguments, e.g. <topic> <type> [<partitions>]
	min, max int             // how many positional arguments it takes
	flags    map[string]bool // its --options: name → takes a value
	summary  string          // one line for help
	tuples   bool            // arguments are (a, b, …) tuples (parallel commands)
	run      func(s *session, a args) error
}

// args are a command's parsed arguments.
type args struct {
	pos    []string          // positional arguments
	opts   map[string]string // --options given ("" for a flag without value)
	tuples [][]string        // a parallel command's tuples
}

func (a args) has(opt string) bool { _, ok := a.opts[opt]; return ok }

// commands is the command set, in help order. Longer keyword sequences
// are matched first (create consumer group before create consumer).
var commands []*command

func init() {
	commands = []*command{
		{words: w("create topic"), usage: "<topic> <Integer|String|JSON> [<partitions>]", min: 2, max: 3,
			summary: "new topic with 1 partition (or the count given, 1..64), named p0, p1, …", run: (*session).createTopic},
		{words: w("create partition"), usage: "<topic> <partition>", min: 2, max: 2,
			summary: "add one partition named <partition>; every group of the topic rebalances", run: (*session).createPartition},
		{words: w("create consumer group"), usage: "<group> <topic> <RoundRobin|Range|Sticky> [--from earliest|latest] [--dead-letter <topic>] [--max-attempts <n>] [--backoff <d>]",
			min: 3, max: 3, flags: map[string]bool{"from": true, "dead-letter": true, "max-attempts": true, "backoff": true},
			summary: "new empty consumer group on the topic with that assignor, from the log start (or --from latest: the log end); " +
				"--dead-letter: every consumer of the group sends an event there after --max-attempts failures (default 3)", run: (*session).createGroup},
		{words: w("create consumer"), usage: "<group> <consumer> [--dead-letter <topic>] [--max-attempts <n>] [--topic <topic>]", min: 2, max: 2,
			flags:   map[string]bool{"dead-letter": true, "max-attempts": true, "topic": true},
			summary: "the consumer joins the group (a rebalance); it follows the group's dead-letter policy: --dead-letter, if given, must be the group's", run: (*session).createConsumer},
		{words: w("create producer"), usage: "<producer> <Integer|String|JSON> <Random|Manual|RoundRobin|Key>", min: 3, max: 3,
			summary: "a producer of that payload type with a fixed partition strategy; Key is the KeyHash partitioner (Kafka's murmur2; KeyHash is accepted too)", run: (*session).createProducer},
		{words: w("delete consumer group"), usage: "<group> [--topic <topic>]", min: 1, max: 1, flags: map[string]bool{"topic": true},
			summary: "remove a consumer group that has no members", run: (*session).deleteGroup},
		{words: w("delete consumer"), usage: "[<group>] <consumer> [--topic <topic>]", min: 1, max: 2, flags: map[string]bool{"topic": true},
			summary: "the consumer leaves its group (a rebalance); with <group>: the admin call removes member <consumer> of the group, " +
				"wherever it runs (one that died holding partitions too)", run: (*session).deleteConsumer},
		{words: w("produce event"), usage: "<producer> <topic> <event.json> [<partition>]", min: 3, max: 4,
			summary: "publish one event file; <partition> is for a Manual producer only", run: (*session).produceEvent},
		{words: w("consume event"), usage: "<consumer> <partition> [--fail]", min: 2, max: 2, flags: map[string]bool{"fail": false},
			summary: "the consumer takes the next event of the partition and acks it (--fail: it fails instead and is retried or dead-lettered)", run: (*session).consumeEvent},
		{words: w("consume events"), usage: "<consumer> <partition> <n> [--fail]", min: 3, max: 3, flags: map[string]bool{"fail": false},
			summary: "the same, up to n events (1..1000) in offset order", run: (*session).consumeEvents},
		{words: w("show topics"), usage: "[--wide]", min: 0, max: 0, flags: map[string]bool{"wide": false},
			summary: "every topic with its type, partitions, events and groups (--wide: no cell is cut to fit 100 columns)", run: (*session).showTopics},
		{words: w("show topic"), usage: "<topic> [--wide]", min: 1, max: 1, flags: map[string]bool{"wide": false},
			summary: "one snapshot of the topic: every partition's log start and end and its retained events (--wide: keys, headers and values whole)", run: (*session).showTopic},
		{words: w("show consumer group"), usage: "<group> [--topic <topic>] [--wide]", min: 1, max: 1, flags: map[string]bool{"wide": false, "topic": true},
			summary: "one snapshot of the group: assignor, members, and per partition its consumer, committed offset, log end, lag, in-flight and attempts (--wide: no cell is cut)", run: (*session).showGroup},
		{words: w("parallel produce"), usage: "(<producer>, <topic>, <event.json>[, <partition>]), ...", tuples: true, min: 3, max: 4,
			summary: "all the publishes run concurrently", run: (*session).parallelProduce},
		{words: w("parallel consume"), usage: "(<consumer>, <partition>[, <n>]), ...", tuples: true, min: 2, max: 3,
			summary: "all the consumes run concurrently; each takes one event (or up to n)", run: (*session).parallelConsume},
		{words: w("set consumer group rebalancing"), usage: "<group> <RoundRobin|Range|Sticky> [--topic <topic>]", min: 2, max: 2, flags: map[string]bool{"topic": true},
			summary: "switch the group's assignor (a rebalance)", run: (*session).setRebalancing},
		{words: w("playback"), usage: "<consumer> <partition> <offset>", min: 3, max: 3,
			summary: "seek the consumer's group on the partition to offset, then consume from there to the log end", run: (*session).playback},
		{words: w("help"), usage: "[<command>]", min: 0, max: 4, summary: "list the commands, or explain one", run: (*session).help},
		{words: w("quit"), summary: "leave", run: func(*session, args) error { return errQuit }},
		{words: w("exit"), summary: "leave (as quit)", run: func(*session, args) error { return errQuit }},
	}
}

func w(s string) []string { return strings.Fields(s) }

// errQuit ends a session.
var errQuit = errors.New("quit")

// lookupCommand returns the command whose keywords start fields, the
// longest match first, and the number of keywords it used.
func lookupCommand(fields []string) (*command, int) {
	if cs := matchCommands(fields); len(cs) > 0 {
		return cs[0], len(cs[0].words)
	}
	return nil, 0
}

// matchCommands returns the commands whose keywords start fields, longest
// first: "delete consumer group g" matches delete consumer group, then
// delete consumer (of a consumer named group).
func matchCommands(fields []string) []*command {
	var out []*command
	for _, c := range commands {
		if len(c.words) <= len(fields) && equalWords(c.words, fields[:len(c.words)]) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *command) int { return len(b.words) - len(a.words) })
	return out
}

// unknownCommand is the error for fields that name no command, listing the
// commands that start with its first word, if any.
func unknownCommand(fields []string) error {
	var like []string
	for _, c := range commands {
		if c.words[0] == fields[0] {
			like = append(like, c.name())
		}
	}
	what := strings.Join(fields[:min(2, len(fields))], " ")
	if len(like) > 0 {
		return fmt.Errorf("%w %s: did you mean %s? (type help for the list)", errUnknownCommand, quote(what), strings.Join(like, ", "))
	}
	return fmt.Errorf("%w %s (type help for the list)", errUnknownCommand, quote(what))
}

func equalWords(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// exec parses and runs one command line. Blank lines and # comments do
// nothing.
func (s *session) exec(line string) error {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	if !utf8.ValidString(line) {
		i := firstInvalid(line)
		return fmt.Errorf("%w: the line is not valid UTF-8 (byte 0x%02x at column %d)", errArgs, line[i], i+1)
	}
	fields, err := shlex.Split(line)
	if err != nil {
		why := "a quote that does not close"
		if strings.Contains(err.Error(), "escape") {
			why = "a backslash at its end"
		}
		return fmt.Errorf("%w: the line has %s", errArgs, why)
	}
	if len(fields) == 0 {
		return nil
	}
	cs := matchCommands(fields)
	if len(cs) == 0 {
		return unknownCommand(fields)
	}
	// The longest command whose arguments parse wins. A shorter one is
	// tried only when the keyword it would read as its first argument names
	// something that exists (delete consumer group, for a consumer named
	// group), so that a line missing arguments is not run as another
	// command. Otherwise the longest one's error is the answer.
	var first error
	for i, c := range cs {
		if i > 0 && !s.known(fields[len(c.words)]) {
			continue
		}
		a, err := parseLine(line, fields, c)
		if err == nil {
			return c.run(s, a)
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// known reports whether name is a topic or consumer group (of the
// backend, whichever process made it), a consumer or a producer.
func (s *session) known(name string) bool {
	_, c := s.consumers[name]
	_, p := s.producers[name]
	if c || p {
		return true
	}
	if _, t, _ := s.lookupTopic(name); t {
		return true
	}
	gs, _ := s.groupTopics(name)
	return len(gs) > 0
}

// firstInvalid is the index of the first byte of line that is not valid
// UTF-8.
func firstInvalid(line string) int {
	for i, r := range line {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(line[i:]); size == 1 {
				return i
			}
		}
	}
	return len(line)
}

// parseLine parses the arguments of c on line (fields: its words).
func parseLine(line string, fields []string, c *command) (args, error) {
	if !c.tuples {
		return parseArgs(fields[len(c.words):], c)
	}
	rest := line
	for range c.words { // drop the keywords from the raw line
		rest = strings.TrimSpace(rest)
		rest = rest[strings.IndexAny(rest+" ", " \t"):]
	}
	tuples, err := parseTuples(rest, c)
	return args{opts: map[string]string{}, tuples: tuples}, err
}

// parseArgs splits positional arguments from --options and checks both
// against c.
func parseArgs(fields []string, c *command) (args, error) {
	a := args{opts: map[string]string{}}
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if !strings.HasPrefix(f, "--") || len(f) == 2 {
			a.pos = append(a.pos, f)
			continue
		}
		name, val, hasVal := strings.Cut(f[2:], "=")
		takes, ok := c.flags[name]
		switch {
		case !ok:
			return a, fmt.Errorf("%w: %s has no option --%s (usage: %s)", errArgs, c.name(), clipped(name), c.synopsis())
		case takes && !hasVal:
			if i+1 >= len(fields) || strings.HasPrefix(fields[i+1], "--") {
				return a, fmt.Errorf("%w: option --%s needs a value (usage: %s)", errArgs, clipped(name), c.synopsis())
			}
			i++
			val = fields[i]
		case !takes && hasVal:
			return a, fmt.Errorf("%w: option --%s takes no value (usage: %s)", errArgs, clipped(name), c.synopsis())
		}
		if takes && val == "" {
			return a, fmt.Errorf("%w: option --%s needs a value, not an empty one (usage: %s)", errArgs, clipped(name), c.synopsis())
		}
		if _, dup := a.opts[name]; dup {
			return a, fmt.Errorf("%w: option --%s given twice", errArgs, clipped(name))
		}
		a.opts[name] = val
	}
	if len(a.pos) < c.min || len(a.pos) > c.max {
		return a, fmt.Errorf("%w: %s takes %s, got %d (usage: %s)", errArgs, c.name(), countWords(c.min, c.max), len(a.pos), c.synopsis())
	}
	return a, nil
}

// parseTuples parses "(a, b, c), (d, e, f)": each item is one shell word,
// so a quoted item may hold spaces, commas and parentheses; a comment may
// follow the last tuple.
func parseTuples(rest string, c *command) ([][]string, error) {
	bad := func(format string, a ...any) ([][]string, error) {
		return nil, fmt.Errorf("%w: %s: %s (usage: %s)", errArgs, c.name(), fmt.Sprintf(format, a...), c.synopsis())
	}
	var out [][]string
	i := 0
	skip := func() {
		for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
			i++
		}
	}
	for {
		skip()
		if i == len(rest) || rest[i] == '#' {
			if len(out) == 0 {
				return bad("needs at least one tuple")
			}
			return out, nil
		}
		if rest[i] != '(' {
			return bad("cannot read %s as a tuple", quote(rest[i:]))
		}
		items, n, err := splitTuple(rest[i+1:])
		if err != nil {
			return bad("%v in %s", err, quote(rest[i:]))
		}
		text := rest[i : i+1+n]
		i += 1 + n
		var t []string
		for k, item := range items {
			words, err := shlex.Split(item)
			if err != nil || len(words) != 1 {
				return bad("tuple %s: item %d is %s: want one word (quote one with spaces)", clipped(text), k+1, quote(strings.TrimSpace(item)))
			}
			t = append(t, words[0])
		}
		if len(t) < c.min || len(t) > c.max {
			return bad("tuple %s: want %s, got %d", clipped(text), countWords(c.min, c.max), len(t))
		}
		out = append(out, t)
		skip()
		switch {
		case i == len(rest) || rest[i] == '#':
		case rest[i] == ',':
			i++
			if skip(); i == len(rest) || rest[i] == '#' {
				return bad("a comma ends the line: want another tuple after it")
			}
		default:
			return bad("want a comma between tuples, before %s", quote(rest[i:]))
		}
	}
}

// splitTuple splits the inside of a tuple, s being what follows its "(",
// at the commas outside quotes, up to the ")" outside quotes. It returns
// the items (still quoted) and how many bytes of s it used, ")" included.
func splitTuple(s string) ([]string, int, error) {
	var items []string
	start := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case quote != 0:
			if ch == '\\' && quote == '"' && i+1 < len(s) {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'':
			quote = ch
		case ch == ',':
			items, start = append(items, s[start:i]), i+1
		case ch == ')':
			return append(items, s[start:i]), i + 1, nil
		case ch == '(':
			return nil, 0, errors.New("a \"(\" inside a tuple (quote the item)")
		}
	}
	if quote != 0 {
		return nil, 0, errors.New("a quote that does not close")
	}
	return nil, 0, errors.New("no closing \")\"")
}

func countWords(lo, hi int) string {
	switch {
	case lo == hi && lo == 1:
		return "1 argument"
	case lo == hi:
		return strconv.Itoa(lo) + " arguments"
	default:
		return fmt.Sprintf("%d to %d arguments", lo, hi)
	}
}

func (c *command) name() string { return strings.Join(c.words, " ") }

func (c *command) synopsis() string {
	if c.usage == "" {
		return c.name()
	}
	return c.name() + " " + c.usage
}

// ---- the commands ----

// checkName refuses a name the command line could not address again:
// one starting with "-" (read as an option, or as "none" in tables).
// Identifiers' other rules are the engine's (1 to 64 of A-Z a-z 0-9 _ -).
func checkName(kind, name string) error {
	if strings.HasPrefix(name, "-") {
		return fmt.Errorf("%w: %s name %s starts with \"-\": want 1 to 64 of A-Z a-z 0-9 _ -, not starting with -", errArgs, kind, quote(name))
	}
	return nil
}

func (s *session) createTopic(a args) error {
	name, typ := a.pos[0], a.pos[1]
	if err := checkName("topic", name); err != nil {
		return err
	}
	k, err := parsePayloadType(typ)
	if err != nil {
		return err
	}
	partitions := 1
	if len(a.pos) == 3 {
		if partitions, err = parseCount("partitions", a.pos[2], 1, engine.MaxPartitionCount); err != nil {
			return err
		}
	}
	if _, ok, err := s.lookupTopic(name); err != nil || ok {
		if err != nil {
			return err
		}
		return fmt.Errorf("topic %s %w", quote(name), errDuplicateID)
	}
	t, err := k.createTopic(s, name, int32(partitions))
	if err != nil {
		return err
	}
	s.addTopic(t)
	s.printf("created topic %s: type %s, partitions %s\n", name, typ, strings.Join(s.parts[name], " "))
	return nil
}

func (s *session) createPartition(a args) error {
	topic, name := a.pos[0], a.pos[1]
	if _, err := s.topic(topic); err != nil {
		return err
	}
	if err := engine.CheckIdentifier("partition", name); err != nil || strings.HasPrefix(name, "-") {
		return fmt.Errorf("%w: partition name %s: want 1 to 64 of A-Z a-z 0-9 _ -, not starting with -", errArgs, quote(name))
	}
	if isNumber(name) {
		return fmt.Errorf("%w: partition name %s is a number, which would read as an index", errArgs, quote(name))
	}
	if idx, err := s.partition(topic, name); err == nil {
		return fmt.Errorf("partition %s of topic %s %w (index %d)", quote(name), quote(topic), errDuplicateID, idx)
	}
	n, err := s.c.AddPartitions(topic, 1)
	if err != nil {
		return err
	}
	// The new partition is the last: index n-1. Partitions another process
	// added meanwhile keep their default names.
	names := s.partNames(topic)
	for len(names) < int(n) {
		names = append(names, "p"+strconv.Itoa(len(names)))
	}
	names[n-1] = name
	s.parts[topic] = names
	s.printf("topic %s: partitions %s\n", topic, strings.Join(names[:n], " "))
	return s.printRebalanced(topic)
}

// printRebalanced prints the assignment of every group of topic, whichever
// process created it.
func (s *session) printRebalanced(topic string) error {
	d, err := s.c.Describe(topic)
	if err != nil {
		return err
	}
	for _, g := range groupsOf(d) {
		line, err := s.assignmentLine(topic, g)
		if err != nil {
			return err
		}
		s.printf("rebalanced %s\n", line)
	}
	return nil
}

func (s *session) createGroup(a args) error {
	group, topic := a.pos[0], a.pos[1]
	if err := checkName("group", group); err != nil {
		return err
	}
	asg, err := parseAssignor(a.pos[2])
	if err != nil {
		return err
	}
	if _, err := s.topic(topic); err != nil {
		return err
	}
	// A group name names one group in the program, as in Kafka, although
	// the library's groups are per topic.
	if ts, err := s.groupTopics(group); err != nil || len(ts) > 0 {
		if err != nil {
			return err
		}
		return fmt.Errorf("consumer group %s %w (on %s)", quote(group), errDuplicateID, topicsPhrase(ts))
	}
	opts, err := s.groupOptions(topic, a)
	if err != nil {
		return err
	}
	ok, err := s.c.CreateGroup(topic, group, asg, opts...)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("consumer group %s %w (on topic %s)", quote(group), errDuplicateID, quote(topic))
	}
	cfg, _, err := s.c.GroupConfig(topic, group)
	if err != nil {
		return err
	}
	var extra string
	if cfg.Start != engine.StartEarliest {
		extra += ", from " + cfg.Start.String()
	}
	if cfg.DeadLetter != "" {
		extra += fmt.Sprintf(", dead-letter to %s after %s", cfg.DeadLetter, attempts(cfg.MaxAttempts))
	}
	s.printf("created consumer group %s on topic %s: assignor %s, no members%s\n", group, topic, a.pos[2], extra)
	return nil
}

// groupOptions are the group options of create consumer group's --from,
// --dead-letter, --max-attempts and --backoff, checked against the
// session's topics.
func (s *session) groupOptions(topic string, a args) ([]tributary.GroupOption, error) {
	var opts []tributary.GroupOption
	if v, ok := a.opts["from"]; ok {
		start, err := engine.ParseGroupStart(v)
		if err != nil {
			return nil, fmt.Errorf("%w: --from %s: want earliest (the log start) or latest (the log end)", errArgs, quote(v))
		}
		opts = append(opts, tributary.WithStart(start))
	}
	dl, err := parseDeadLetter(a)
	if err != nil {
		return nil, err
	}
	if dl.deadLetter != "" {
		if err := s.checkDeadLetterKind(topic, dl.deadLetter); err != nil {
			return nil, err
		}
		opts = append(opts, tributary.WithDeadLetter(dl.deadLetter, dl.maxAttempts))
	}
	if v, ok := a.opts["backoff"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Hour {
			return nil, fmt.Errorf("%w: --backoff %s: want a duration such as 250ms or 2s, above 0 and at most 1h", errArgs, quote(v))
		}
		opts = append(opts, tributary.WithBackoff(d, max(d, tributary.DefaultMaxBackoff)))
	}
	return opts, nil
}

// checkDeadLetterKind refuses dead-letter topic dl, if it exists, when its
// payload type is not topic's; "" (no dead-letter topic) passes.
func (s *session) checkDeadLetterKind(topic, dl string) error {
	if dl == "" {
		return nil
	}
	d, ok, err := s.lookupTopic(dl)
	if err != nil || !ok {
		return err
	}
	t, err := s.topic(topic)
	if err != nil {
		return err
	}
	if d.Kind() != t.Kind() {
		return fmt.Errorf("%w: dead-letter topic %s holds %s events; topic %s holds %s", errTypeMismatch, quote(dl), d.Kind(), quote(topic), t.Kind())
	}
	return nil
}

// topicsPhrase is `topic "a"` or `topics "a" "b"`.
func topicsPhrase(topics []string) string {
	q := make([]string, len(topics))
	for i, t := range topics {
		q[i] = quote(t)
	}
	if len(q) == 1 {
		return "topic " + q[0]
	}
	return "topics " + strings.Join(q, " ")
}

// attempts is n attempts, in words.
func attempts(n int32) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// parseDeadLetter reads --dead-letter and --max-attempts (default 3; alone,
// refused).
func parseDeadLetter(a args) (consumerOpts, error) {
	var o consumerOpts
	if a.has("max-attempts") && !a.has("dead-letter") {
		return o, fmt.Errorf("%w: --max-attempts needs --dead-letter <topic>", errArgs)
	}
	if !a.has("dead-letter") {
		return o, nil
	}
	o.deadLetter, o.maxAttempts = a.opts["dead-letter"], 3
	if err := checkName("dead-letter topic", o.deadLetter); err != nil {
		return o, err
	}
	if v, ok := a.opts["max-attempts"]; ok {
		n, err := parseCount("--max-attempts", v, 1, tributary.MaxDeadLetterAttempts)
		if err != nil {
			return o, err
		}
		o.maxAttempts = int32(n)
	}
	return o, nil
}

func (s *session) createConsumer(a args) error {
	group, name := a.pos[0], a.pos[1]
	if err := checkName("consumer", name); err != nil {
		return err
	}
	topic, err := s.group(group, a.opts["topic"])
	if err != nil {
		return err
	}
	// A consumer of this name that has expired (rule 24) joins again as a
	// new incarnation: the old one is closed once every check has passed.
	old, exists := s.consumers[name]
	if exists {
		again, err := s.canJoinAgain(old, topic, group)
		if err != nil {
			return err
		}
		if !again {
			return fmt.Errorf("consumer %s %w (in group %s)", quote(name), errDuplicateID, quote(old.Group()))
		}
	}
	t, err := s.topic(topic)
	if err != nil {
		return err
	}
	o, err := parseDeadLetter(a)
	if err != nil {
		return err
	}
	if err := s.checkDeadLetterKind(topic, o.deadLetter); err != nil {
		return err
	}
	cfg, _, err := s.c.GroupConfig(topic, group)
	if err != nil {
		return err
	}
	policyErr := func() error {
		return wrapClass(tributary.ErrPolicyMismatch, "consumer %s: --dead-letter %s --max-attempts %d is not group %s's policy (%s): drop the options to follow it",
			quote(name), clipped(o.deadLetter), o.maxAttempts, clipped(group), cfg.Policy())
	}
	if exists {
		// NewConsumer checks the policy too, but only after the old
		// incarnation is closed.
		if o.deadLetter != "" && (o.deadLetter != cfg.DeadLetter || o.maxAttempts != cfg.MaxAttempts) {
			return policyErr()
		}
		if err := old.Close(); err != nil { // not a member: its Leave changes nothing
			return err
		}
		delete(s.consumers, name)
	}
	// The group's first consumer creates its dead-letter topic if absent
	// (here, or in another process before).
	var dlExisted bool
	if cfg.DeadLetter != "" {
		if _, dlExisted, err = s.lookupTopic(cfg.DeadLetter); err != nil {
			return err
		}
	}
	// A member of that name already (another process's, or one whose
	// process died) keeps its partitions and its in-flight deliveries.
	before, _, err := s.describeGroup(topic, group)
	if err != nil {
		return err
	}
	var held []int32
	for _, gp := range before.Partitions {
		if gp.Owner == name && gp.InFlight {
			held = append(held, gp.Partition)
		}
	}
	var released []int32 // held before, free now
	c, err := t.newConsumer(group, name, o)
	if err == nil && len(held) > 0 {
		// NewConsumer is a new incarnation (Rejoin, contract rule 25): a
		// backend that keeps rule 25 has released what the old one held.
		after, _, derr := s.describeGroup(topic, group)
		if derr != nil {
			c.Close() //nolint:errcheck // reporting derr
			return derr
		}
		released = held
		held = nil
		for _, p := range released {
			if gp := after.Partitions[p]; gp.Owner == name && gp.InFlight {
				held = append(held, p)
			}
		}
	}
	if errors.Is(err, tributary.ErrPolicyMismatch) {
		return policyErr()
	}
	if err != nil {
		return err
	}
	s.consumers[name] = c
	if dlq, _ := c.DeadLetter(); dlq != "" {
		if _, ok := s.topics[dlq]; !ok {
			dl, err := t.open(dlq)
			if err != nil {
				return err
			}
			s.addTopic(dl)
			if !dlExisted {
				s.printf("created dead-letter topic %s: type %s, partitions %s\n", dl.Name(), dl.Kind(), strings.Join(s.parts[dl.Name()], " "))
			}
		}
	}
	line, err := s.assignmentLine(topic, group)
	if err != nil {
		return err
	}
	if exists {
		s.printf("%s had expired (%s) and joined again as a new incarnation: %s\n", name, s.expiredNote(), line)
	} else {
		s.printf("%s joined %s\n", name, line)
	}
	switch {
	case len(held) > 0:
		s.printf("%s was a member already (of another process, or of one that died): %s %s hold events in flight to it, which no consume here can take; "+
			"delete consumer %s %s frees them, then create consumer %s %s again\n", name, topic, s.partList(topic, held), group, name, group, name)
	case len(released) > 0:
		s.printf("%s was a member already (of another process, or of one that died): joined as its new incarnation; "+
			"the events in flight to the old one on %s %s are delivered again, attempt + 1\n", name, topic, s.partList(topic, released))
	case slices.Contains(before.Members, name):
		s.printf("%s was a member already (of another process, or of one that died)\n", name)
	}
	return nil
}

// parseStrategy returns a fresh partitioner for a create producer
// strategy word: Random, Manual, RoundRobin or Key (docs/cli.md), where Key
// is the program's word for the library's KeyHash partitioner. The
// partitioner's own name is accepted too (KeyHash, as every output prints
// a producer's strategy: by its partitioner's Name()).
func parseStrategy(word string) (tributary.Partitioner, error) {
	name := word
	if word == "Key" {
		name = "KeyHash"
	}
	pt, err := tributary.ParsePartitioner(name)
	if err != nil {
		return nil, fmt.Errorf("%w: strategy %s: want Random, Manual, RoundRobin or Key (KeyHash)", errArgs, quote(word))
	}
	return pt, nil
}

func (s *session) createProducer(a args) error {
	name, typ := a.pos[0], a.pos[1]
	if err := checkName("producer", name); err != nil {
		return err
	}
	k, err := parsePayloadType(typ)
	if err != nil {
		return err
	}
	pt, err := parseStrategy(a.pos[2])
	if err != nil {
		return err
	}
	if pt.Name() == "Random" && s.seed >= 0 {
		h := fnv.New64a()
		h.Write([]byte(name))
		pt = tributary.RandomSeeded(uint64(s.seed) ^ h.Sum64())
	}
	if _, ok := s.producers[name]; ok {
		return fmt.Errorf("producer %s %w", quote(name), errDuplicateID)
	}
	p, err := k.newProducer(s, name, pt)
	if err != nil {
		return err
	}
	s.producers[name] = p
	s.printf("created producer %s: type %s, strategy %s\n", name, typ, p.Strategy())
	return nil
}

func (s *session) deleteGroup(a args) error {
	group := a.pos[0]
	topic, err := s.group(group, a.opts["topic"])
	if err != nil {
		return err
	}
	if _, err := s.c.DeleteGroup(topic, group); err != nil {
		if errors.Is(err, engine.ErrGroupNotEmpty) {
			line, _ := s.assignmentLine(topic, group)
			return fmt.Errorf("consumer group %s has members: %s (delete them first)", quote(group), line)
		}
		return err
	}
	s.printf("deleted consumer group %s of topic %s\n", group, topic)
	return nil
}

func (s *session) deleteConsumer(a args) error {
	if len(a.pos) == 2 {
		return s.removeMember(a.pos[0], a.pos[1], a.opts["topic"])
	}
	if a.has("topic") {
		return fmt.Errorf("%w: --topic is for delete consumer <group> <member> (a consumer of this program knows its topic)", errArgs)
	}
	c, err := s.consumer(a.pos[0])
	if err != nil {
		return err
	}
	// With a session timeout the consumer may have expired already: then
	// it is no member to leave, and only the program forgets it.
	expired := false
	if s.c.Backend().SessionTimeout() > 0 {
		member, err := s.isMember(c)
		// A group gone: deleted, which only a group with no members can be.
		expired = errors.Is(err, errUnknownID) || (err == nil && !member)
	}
	if err := c.Close(); err != nil {
		return err
	}
	delete(s.consumers, c.Name())
	line, err := s.assignmentLine(c.Topic().Name(), c.Group())
	if err != nil {
		if expired {
			s.printf("deleted %s, which had expired (%s)\n", c.Name(), s.expiredNote())
			return nil
		}
		return err
	}
	if expired {
		s.printf("deleted %s, which had expired (%s) and was no member to leave: %s\n", c.Name(), s.expiredNote(), line)
		return nil
	}
	s.printf("%s left %s\n", c.Name(), line)
	return nil
}

// removeMember is delete consumer <group> <member>: Cluster.RemoveMember,
// the admin call, for any member of the group, this program's consumer or
// another process's (one that died holding partitions included: its
// in-flight deliveries are cancelled and its partitions move). A consumer
// of this program removed so is closed. topic is --topic ("" for none).
func (s *session) removeMember(group, member, topic string) error {
	topic, err := s.group(group, topic)
	if err != nil {
		return err
	}
	ok, err := s.c.RemoveMember(topic, group, member)
	if err != nil {
		return err
	}
	if !ok {
		line, _ := s.assignmentLine(topic, group)
		if c, ok := s.consumers[member]; ok && c.Group() == group && c.Topic().Name() == topic && s.c.Backend().SessionTimeout() > 0 {
			// On the memory backend only this program removes its
			// consumers: one that is not a member has expired.
			return fmt.Errorf("%w member %s of consumer group %s: it is not a member any more, its session expired (%s); "+
				"delete consumer %s forgets it, create consumer %s %s joins it again (%s)", errUnknownID, quote(member), quote(group), s.expiredNote(), member, group, member, line)
		}
		return fmt.Errorf("%w member %s of consumer group %s (%s)", errUnknownID, quote(member), quote(group), line)
	}
	if c, ok := s.consumers[member]; ok && c.Group() == group && c.Topic().Name() == topic {
		c.Close() //nolint:errcheck // already removed: its Leave is false
		delete(s.consumers, member)
	}
	line, err := s.assignmentLine(topic, group)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "removed %s from %s\n", member, line)
	return nil
}

// produceJob is one checked publish: every argument resolved, the event
// file read.
type produceJob struct {
	p         producerRef
	t         topicRef
	file      string
	ev        event
	partition int32
}

// prepareProduce resolves a produce's arguments and reads its event file,
// changing nothing.
func (s *session) prepareProduce(producer, topic, file string, partition *string) (produceJob, error) {
	p, err := s.producer(producer)
	if err != nil {
		return produceJob{}, err
	}
	t, err := s.topic(topic)
	if err != nil {
		return produceJob{}, err
	}
	if p.Kind() != t.Kind() {
		return produceJob{}, fmt.Errorf("%w: producer %s makes %s events; topic %s holds %s", errTypeMismatch, quote(producer), p.Kind(), quote(topic), t.Kind())
	}
	j := produceJob{p: p, t: t, file: file}
	switch manual := p.Strategy() == "Manual"; {
	case manual && partition == nil:
		return j, fmt.Errorf("%w: producer %s is Manual: give the partition (produce event %s %s %s <partition>)", errArgs, quote(producer), producer, topic, clipped(file))
	case !manual && partition != nil:
		return j, fmt.Errorf("%w: producer %s chooses partitions itself (%s): drop the partition %s", errArgs, quote(producer), p.Strategy(), quote(*partition))
	case manual:
		if j.partition, err = s.partition(topic, *partition); err != nil {
			return j, err
		}
	}
	if j.ev, err = s.readEvent(file); err != nil {
		return j, err
	}
	for _, h := range j.ev.Headers {
		if h.Key == tributary.HeaderPayloadType {
			return j, fmt.Errorf("%w %s: header %s is reserved: the library sets it to the topic's payload type", errBadEvent, clipped(file), quote(h.Key))
		}
	}
	if err := p.check(j.ev); err != nil {
		return j, fmt.Errorf("%w: event file %s: %v: topic %s holds %s events", errTypeMismatch, clipped(file), err, quote(topic), t.Kind())
	}
	return j, nil
}

func (s *session) produceEvent(a args) error {
	var part *string
	if len(a.pos) == 4 {
		part = &a.pos[3]
	}
	j, err := s.prepareProduce(a.pos[0], a.pos[1], a.pos[2], part)
	if err != nil {
		return err
	}
	r, err := j.p.produce(s.ctx(), j.t, j.ev, j.partition)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("produced %s to %s %s at offset %d", r.ID, j.t.Name(), s.partName(j.t.Name(), r.Partition), r.Offset)
	s.printf("%s%s\n", line, keyNote(r.Key, lineWidth-width(line)))
	return nil
}

// keyNote is ` (key "…")` for a produce's confirmation, "" without a key.
// The quoted key is cut with "…" (as a table cuts a cell) to the room
// left on the line, or, when that is less than minCut, to a line of its
// own (printf wraps the note there).
func keyNote(key string, room int) string {
	if key == "" {
		return ""
	}
	const around = len(" (key ") + len(")")
	fit := room - around
	if fit < minCut {
		fit = lineWidth - 2 - len(")") // the continuation line, indented by two
	}
	return " (key " + quoteCut(key, fit) + ")"
}

// consumeJob is one checked consume: the consumer owns the partition.
type consumeJob struct {
	c         consumerRef
	partition int32
	n         int
}

// prepareConsume resolves a consume's arguments, changing nothing;
// readyConsumes then checks that the consumer owns the partition and
// makes it alive.
func (s *session) prepareConsume(consumer, partition string, n int) (consumeJob, error) {
	c, err := s.consumer(consumer)
	if err != nil {
		return consumeJob{}, err
	}
	p, err := s.partition(c.Topic().Name(), partition)
	if err != nil {
		return consumeJob{}, err
	}
	return consumeJob{c: c, partition: p, n: n}, nil
}

// keepAlive heartbeats c before a command uses it (contract rule 24, with
// -session-timeout): a consumer that no command named for the session
// timeout has expired, and joins its group again here, which the program
// says with the group's new assignment.
func (s *session) keepAlive(c consumerRef) error {
	was := c.Stats().Expired
	if err := c.Heartbeat(); err != nil {
		return err
	}
	if c.Stats().Expired == was {
		return nil
	}
	line, err := s.assignmentLine(c.Topic().Name(), c.Group())
	if err != nil {
		return err
	}
	s.printf("%s had expired (%s) and joined again: %s\n", c.Name(), s.expiredNote(), line)
	return nil
}

// consume runs j: up to j.n events (with fail, failed attempts), stopping
// early when the partition has nothing more to give. With wait > 0 (a
// parallel consume), when the partition's next event is in flight to
// another tuple of the same command, it waits up to wait for that tuple to
// settle it instead of stopping, so that tuples sharing a partition take
// every event between them.
func (s *session) consume(j consumeJob, fail string, wait time.Duration) ([]delivery, error) {
	var out []delivery
	deadline := time.Now().Add(wait)
	for len(out) < j.n {
		d, ok, err := j.c.consume(s.ctx(), j.partition, fail)
		if ok {
			out = append(out, d)
		}
		if err != nil || (!ok && wait == 0) {
			return out, err
		}
		if ok {
			continue
		}
		g, _, err := s.describeGroup(j.c.Topic().Name(), j.c.Group())
		if err != nil || !g.Partitions[j.partition].InFlight || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(50 * time.Microsecond)
	}
	return out, nil
}

// parallelWait bounds how long a parallel consume waits for another tuple
// to settle the event it holds.
const parallelWait = 5 * time.Second

func (s *session) consumeEvent(a args) error  { return s.consumeN(a, 1) }
func (s *session) consumeEvents(a args) error { return s.consumeN(a, -1) }

func (s *session) consumeN(a args, n int) error {
	if n < 0 {
		var err error
		if n, err = parseCount("<n>", a.pos[2], 1, 1000); err != nil {
			return err
		}
	}
	j, err := s.prepareConsume(a.pos[0], a.pos[1], n)
	if err != nil {
		return err
	}
	if _, err := s.readyConsumes([]consumeJob{j}); err != nil {
		return err
	}
	fail := ""
	if a.has("fail") {
		fail = "simulated failure (--fail)"
	}
	ds, err := s.consume(j, fail, 0)
	s.printDeliveries(j, ds)
	if err != nil {
		return err
	}
	if len(ds) < n {
		return s.printNothingMore(j, len(ds))
	}
	return nil
}

// printNothingMore says why a consume got fewer events than asked for.
func (s *session) printNothingMore(j consumeJob, got int) error {
	topic := j.c.Topic().Name()
	g, d, err := s.describeGroup(topic, j.c.Group())
	if err != nil {
		return err
	}
	gp, end := g.Partitions[j.partition], d.Partitions[j.partition].LogEndOffset
	why := fmt.Sprintf("at the log end (offset %d)", end)
	if gp.InFlight {
		why = fmt.Sprintf("offset %d is in flight", gp.Committed)
	}
	if got == 0 {
		s.printf("%s: nothing to consume on %s %s: %s\n", j.c.Name(), topic, s.partName(topic, j.partition), why)
	} else {
		s.printf("%s: %s %s has no more events: %s\n", j.c.Name(), topic, s.partName(topic, j.partition), why)
	}
	return nil
}

func (s *session) setRebalancing(a args) error {
	group := a.pos[0]
	asg, err := parseAssignor(a.pos[1])
	if err != nil {
		return err
	}
	topic, err := s.group(group, a.opts["topic"])
	if err != nil {
		return err
	}
	if _, err := s.c.SetAssignor(topic, group, asg); err != nil {
		return err
	}
	line, err := s.assignmentLine(topic, group)
	if err != nil {
		return err
	}
	s.printf("rebalanced %s\n", line)
	return nil
}

func (s *session) playback(a args) error {
	j, err := s.prepareConsume(a.pos[0], a.pos[1], 0)
	if err != nil {
		return err
	}
	off, err := strconv.ParseInt(a.pos[2], 10, 64)
	if err != nil || !isNumber(a.pos[2]) {
		return fmt.Errorf("%w: offset %s: want a whole number ≥ 0", errArgs, quote(a.pos[2]))
	}
	topic := j.c.Topic().Name()
	if _, err := s.checkConsumes([]consumeJob{j}); err != nil {
		return err
	}
	// The seek's range, checked before the consumer is made alive (a
	// rejoin), so that a refused playback changes nothing.
	d, err := s.c.Describe(topic)
	if err != nil {
		return err
	}
	if pd := d.Partitions[j.partition]; off < pd.LogStartOffset || off > pd.LogEndOffset {
		return s.outsideReplay(topic, j.partition, off, pd)
	}
	if _, err := s.startConsumes([]consumeJob{j}); err != nil {
		return err
	}
	g, _, err := s.describeGroup(topic, j.c.Group())
	if err != nil {
		return err
	}
	was := g.Partitions[j.partition].Committed
	if err := j.c.seek(j.partition, off); err != nil {
		if errors.Is(err, tributary.ErrOffsetOutOfRange) {
			d, _ := s.c.Describe(topic)
			return s.outsideReplay(topic, j.partition, off, d.Partitions[j.partition])
		}
		return err
	}
	if off > was {
		s.printf("%s skipped %d unconsumed events on %s %s (offsets %d to %d)\n", j.c.Group(), off-was, topic, s.partName(topic, j.partition), was, off-1)
	}
	if d, err = s.c.Describe(topic); err != nil {
		return err
	}
	j.n = int(d.Partitions[j.partition].LogEndOffset - off)
	if j.n == 0 {
		s.printf("%s: nothing to replay on %s %s: offset %d is the log end\n", j.c.Group(), topic, s.partName(topic, j.partition), off)
		return nil
	}
	s.printf("%s replays %s %s from offset %d to %d\n", j.c.Group(), topic, s.partName(topic, j.partition), off, off+int64(j.n)-1)
	ds, err := s.consume(j, "", 0)
	s.printDeliveries(j, ds)
	return err
}

// outsideReplay is playback's error for an offset outside pd's replayable
// range.
func (s *session) outsideReplay(topic string, partition int32, off int64, pd engine.PartitionDescription) error {
	return fmt.Errorf("offset %d is outside what %s %s can replay: %d (log start) to %d (log end)", off, topic, s.partName(topic, partition), pd.LogStartOffset, pd.LogEndOffset)
}

func (s *session) parallelProduce(a args) error {
	jobs := make([]produceJob, len(a.tuples))
	for i, t := range a.tuples {
		var part *string
		if len(t) == 4 {
			part = &t[3]
		}
		var err error
		if jobs[i], err = s.prepareProduce(t[0], t[1], t[2], part); err != nil {
			return fmt.Errorf("tuple %d: %w", i+1, err)
		}
	}
	results := make([]sent, len(jobs))
	errs := make([]error, len(jobs))
	var g errgroup.Group
	for i, j := range jobs {
		g.Go(func() error {
			r, err := j.p.produce(s.ctx(), j.t, j.ev, j.partition)
			if err != nil {
				errs[i] = fmt.Errorf("tuple %d (%s, %s, %s): %w", i+1, j.p.Name(), j.t.Name(), clipped(j.file), err)
			}
			results[i] = r
			return nil
		})
	}
	g.Wait() //nolint:errcheck // the errors are in errs, in tuple order
	tw := newTable("PRODUCER", "TOPIC", "PARTITION", "OFFSET", "ID", "KEY", "EVENT FILE")
	for i, j := range jobs {
		if r := results[i]; r.ID != "" {
			tw.AppendRow(row(j.p.Name(), j.t.Name(), s.partName(j.t.Name(), r.Partition), r.Offset, r.ID, cell(r.Key), cell(j.file)))
		}
	}
	if tw.Length() > 0 {
		s.render(tw)
	}
	return errors.Join(errs...)
}

func (s *session) parallelConsume(a args) error {
	jobs := make([]consumeJob, len(a.tuples))
	for i, t := range a.tuples {
		n := 1
		var err error
		if len(t) == 3 {
			if n, err = parseCount("<n>", t[2], 1, 1000); err != nil {
				return fmt.Errorf("tuple %d: %w", i+1, err)
			}
		}
		if jobs[i], err = s.prepareConsume(t[0], t[1], n); err != nil {
			return fmt.Errorf("tuple %d: %w", i+1, err)
		}
	}
	if i, err := s.readyConsumes(jobs); err != nil {
		return fmt.Errorf("tuple %d: %w", i+1, err)
	}
	results := make([][]delivery, len(jobs))
	errs := make([]error, len(jobs))
	var g errgroup.Group
	for i, j := range jobs {
		g.Go(func() error {
			results[i], errs[i] = s.consume(j, "", parallelWait)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("tuple %d: %w", i+1, errs[i])
			}
			return nil
		})
	}
	g.Wait() //nolint:errcheck // the errors are in errs, in tuple order
	err := errors.Join(errs...)
	tw := deliveryTable()
	for i, j := range jobs {
		if len(results[i]) == 0 {
			tw.AppendRow(row(j.c.Name(), s.partName(j.c.Topic().Name(), j.partition), "-", "-", "-", "-", "-", "(nothing to consume)"))
		}
		for _, d := range results[i] {
			tw.AppendRow(s.deliveryRow(j, d))
		}
	}
	s.render(tw)
	return err
}

func (s *session) help(a args) error {
	if len(a.pos) > 0 {
		c, n := lookupCommand(a.pos)
		if c == nil || n != len(a.pos) {
			// A prefix (help consume, help show): every command it starts.
			var shown bool
			for _, c := range commands {
				if len(c.words) > len(a.pos) && equalWords(c.words[:len(a.pos)], a.pos) {
					s.helpEntry(c)
					shown = true
				}
			}
			if !shown {
				return unknownCommand(a.pos)
			}
			return nil
		}
		s.helpEntry(c)
		return nil
	}
	for _, c := range commands {
		s.helpEntry(c)
	}
	s.printf("Event files (key and headers optional):")
	s.printf("  {\"key\": \"...\", \"headers\": {\"name\": \"value\"}, \"value\": <payload>}")
	s.printf("A <partition> is a name (p0, p1, …) or an index.")
	s.printf("Topics and consumer groups are found on the backend, whichever process made them; " +
		"--topic <topic> names a group's topic where several topics have a group of that name.")
	s.printf("# starts a comment, at a line's start or after a space.")
	return nil
}

// helpEntry prints c's synopsis, then its summary indented by two, each
// wrapped to lineWidth; a synopsis breaks only between arguments.
func (s *session) helpEntry(c *command) {
	for _, l := range wrap(c.synopsis(), lineWidth, 4, "[]<>()") {
		fmt.Fprintln(s.out, l)
	}
	for _, l := range wrap(c.summary, lineWidth-2, 0, "") {
		fmt.Fprintln(s.out, "  "+l)
	}
}
