package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jedib0t/go-pretty/v6/table"

	"github.com/f91dcac0/tributary/engine"
)

// maxValueCell is the most runes of a value a table cell holds before the
// table is fitted to lineWidth; a value cut here notes its full size.
const maxValueCell = 120

// valueCell is a formatted value for a table, cut to maxValueCell runes
// with its full size noted, so that one large event costs no more than
// its cell; wide keeps it whole (a show command's --wide).
func valueCell(v string, wide bool) string {
	r := []rune(v)
	if wide || len(r) <= maxValueCell {
		return v
	}
	return fmt.Sprintf("%s… (%d bytes)", string(r[:maxValueCell]), len(v))
}

// dash is s, or "-" for an empty cell (so every row has every column).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cell is a user's text (a key, a header) as one table cell: "-" when
// empty, Go-quoted when it has a space, a control or non-printable
// character, a quote, or could be read as "-", so that every row stays one
// line and splits on whitespace.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if s == "-" || strings.IndexFunc(s, func(r rune) bool { return r == '"' || !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// lastSeenLine says how long ago each member of g was last seen by the
// broker (contract rule 24), against the session timeout: "session timeout
// 45s; last seen: c1 3.2s ago, c2 0s ago".
func (s *session) lastSeenLine(g engine.GroupDescription) string {
	now := s.brokerNow()
	ages := make([]string, len(g.Members))
	for i, m := range g.Members {
		ages[i] = fmt.Sprintf("%s %v ago", m, max(0, now.Sub(g.LastSeen[i])).Round(100*time.Millisecond))
	}
	if len(ages) == 0 {
		ages = []string{"no members"}
	}
	return fmt.Sprintf("session timeout %v; last seen: %s", s.c.Backend().SessionTimeout(), strings.Join(ages, ", "))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printDeliveries prints the events a consume took, in order.
func (s *session) printDeliveries(j consumeJob, ds []delivery) {
	if len(ds) == 0 {
		return
	}
	tw := deliveryTable()
	for _, d := range ds {
		tw.AppendRow(s.deliveryRow(j, d))
	}
	s.render(tw)
}

// deliveryTable is the table of consumed events: deliveryRow's columns.
func deliveryTable() *outTable {
	return newTable("CONSUMER", "PARTITION", "OFFSET", "ID", "ATTEMPT", "KEY", "RESULT", "VALUE")
}

// deliveryRow is d, taken by j's consumer, as a row of deliveryTable.
func (s *session) deliveryRow(j consumeJob, d delivery) table.Row {
	return row(j.c.Name(), s.partName(j.c.Topic().Name(), d.Partition), d.Offset, d.ID, d.Attempt, cell(d.Key), d.Outcome, valueCell(d.Value, false))
}

// showTopics prints every topic of the backend, whichever process created
// it.
func (s *session) showTopics(a args) error {
	names := s.c.Topics()
	if len(names) == 0 {
		s.printf("no topics (create topic <topic> <type> [<partitions>])")
		return nil
	}
	tw := newTable("TOPIC", "TYPE", "PARTITIONS", "RETAINED", "GROUPS")
	tw.wide = a.has("wide")
	for _, name := range names {
		t, err := s.topic(name)
		if err != nil {
			return err
		}
		d, err := s.c.Describe(name)
		if err != nil {
			return err
		}
		var retained int64
		for _, p := range d.Partitions {
			retained += p.LogEndOffset - p.LogStartOffset
		}
		tw.AppendRow(row(name, cell(t.Kind()), len(d.Partitions), retained, dash(strings.Join(groupsOf(d), " "))))
	}
	s.render(tw)
	return nil
}

// showTopic prints one snapshot of a topic: a table of its partitions
// (log start and end, events retained), then a table of its retained
// events, a line each.
func (s *session) showTopic(a args) error {
	t, err := s.topic(a.pos[0])
	if err != nil {
		return err
	}
	snap, err := t.snapshot()
	if err != nil {
		return err
	}
	s.partNames(t.Name())
	s.printf("topic %s: type %s, partitions %d, groups %s\n", t.Name(), cell(t.Kind()), len(snap.Partitions), list(groupsOf(snap.TopicDescription)))
	parts := newTable("PARTITION", "LOG-START", "LOG-END", "RETAINED")
	parts.wide = a.has("wide")
	events := newTable("PARTITION", "OFFSET", "ID", "TIME", "KEY", "HEADERS", "VALUE")
	events.wide = parts.wide
	for p, pd := range snap.Partitions {
		name := s.partName(t.Name(), int32(p))
		parts.AppendRow(row(name, pd.LogStartOffset, pd.LogEndOffset, pd.LogEndOffset-pd.LogStartOffset))
		for _, m := range snap.Messages[p] {
			events.AppendRow(row(name, m.Offset, m.ID, m.Time.UTC().Format(time.RFC3339), cell(m.Key), headerText(m.Headers), valueCell(m.Value, events.wide)))
		}
	}
	s.render(parts)
	if events.Length() == 0 {
		s.printf("no retained events")
		return nil
	}
	s.render(events)
	return nil
}

// headerCell is cell for a header's key or value, also quoting "=" and ","
// (the separators of headerText) and leaving "" as "".
func headerCell(s string) string {
	if s != "" && !strings.ContainsAny(s, "=,") {
		if c := cell(s); c != "-" || s == "-" {
			return c
		}
	}
	return strconv.Quote(s)
}

func headerText(hs []engine.Header) string {
	if len(hs) == 0 {
		return "-"
	}
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = headerCell(h.Key) + "=" + headerCell(h.Value)
	}
	return strings.Join(parts, ",")
}

// showGroup prints one snapshot of a group, in the columns of
// kafka-consumer-groups --describe plus the assignor, in-flight and
// attempts, after the group's configuration: where it started and its
// failure policy. The group is looked up on every topic of the backend, as
// kafka-consumer-groups --describe --group finds it: when several topics
// have a group of that name, each is shown (--topic picks one).
func (s *session) showGroup(a args) error {
	group := a.pos[0]
	var topics []string
	if topic := a.opts["topic"]; topic != "" {
		t, err := s.group(group, topic)
		if err != nil {
			return err
		}
		topics = []string{t}
	} else {
		var err error
		if topics, err = s.groupTopics(group); err != nil {
			return err
		}
		if len(topics) == 0 {
			return s.unknownGroup(group)
		}
	}
	for i, topic := range topics {
		if i > 0 {
			fmt.Fprintln(s.out)
		}
		if err := s.showGroupOn(topic, group, a.has("wide")); err != nil {
			return err
		}
	}
	return nil
}

// showGroupOn prints group of topic: showGroup's snapshot.
func (s *session) showGroupOn(topic, group string, wide bool) error {
	s.partNames(topic)
	g, d, err := s.describeGroup(topic, group)
	if err != nil {
		return err
	}
	s.printf("group %s: topic %s, assignor %s, members %s\n", g.Group, d.Topic, g.Assignor, list(g.Members))
	if g.LastSeen != nil {
		s.printf("%s\n", s.lastSeenLine(g))
	}
	cfg, _, err := s.c.GroupConfig(d.Topic, g.Group)
	if err != nil {
		return err
	}
	s.printf("from %s; %s\n", cfg.Start, cfg.Policy())
	tw := newTable("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "IN-FLIGHT", "ATTEMPTS")
	tw.wide = wide
	for p, gp := range g.Partitions {
		tw.AppendRow(row(d.Topic, s.partName(d.Topic, int32(p)), gp.Committed, d.Partitions[p].LogEndOffset, gp.Lag, dash(gp.Owner), yesNo(gp.InFlight), gp.Attempts))
	}
	s.render(tw)
	return nil
}
