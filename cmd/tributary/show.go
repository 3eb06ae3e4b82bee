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

// newTable is a table in the program's style: no borders, columns two
// spaces apart, upper-case headers, so that output is aligned for people
// and splits on whitespace for grep and awk.
func newTable(headers ...any) table.Writer {
	tw := table.NewWriter()
	st := table.StyleDefault
	st.Options = table.OptionsNoBordersAndSeparators
	st.Box.PaddingLeft, st.Box.PaddingRight = "", "  "
	tw.SetStyle(st)
	tw.AppendHeader(table.Row(headers))
	return tw
}

// row is a table row; every cell is printed as text, left-aligned.
func row(cells ...any) table.Row {
	r := make(table.Row, len(cells))
	for i, c := range cells {
		r[i] = fmt.Sprint(c)
	}
	return r
}

// maxValueCell is the most runes of a value a table shows.
const maxValueCell = 120

// valueCell is a formatted value for a table, cut to maxValueCell runes
// with its full size noted, so that one large event does not widen every
// row.
func valueCell(v string) string {
	r := []rune(v)
	if len(r) <= maxValueCell {
		return v
	}
	return fmt.Sprintf("%s… (%d bytes)", string(r[:maxValueCell]), len(v))
}

// render prints tw without trailing spaces.
func (s *session) render(tw table.Writer) {
	for _, line := range strings.Split(tw.Render(), "\n") {
		fmt.Fprintln(s.out, strings.TrimRight(line, " "))
	}
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
func deliveryTable() table.Writer {
	return newTable("CONSUMER", "PARTITION", "OFFSET", "ID", "ATTEMPT", "KEY", "RESULT", "VALUE")
}

// deliveryRow is d, taken by j's consumer, as a row of deliveryTable.
func (s *session) deliveryRow(j consumeJob, d delivery) table.Row {
	return row(j.c.Name(), s.partName(j.c.Topic().Name(), d.Partition), d.Offset, d.ID, d.Attempt, cell(d.Key), d.Outcome, valueCell(d.Value))
}

func (s *session) showTopics(args) error {
	if len(s.topics) == 0 {
		fmt.Fprintln(s.out, "no topics (create topic <topic> <type> [<partitions>])")
		return nil
	}
	tw := newTable("TOPIC", "TYPE", "PARTITIONS", "RETAINED", "GROUPS")
	for _, name := range keys(s.topics) {
		d, err := s.c.Describe(name)
		if err != nil {
			return err
		}
		var retained int64
		for _, p := range d.Partitions {
			retained += p.LogEndOffset - p.LogStartOffset
		}
		groups := make([]string, len(d.Groups))
		for i, g := range d.Groups {
			groups[i] = g.Group
		}
		tw.AppendRow(row(name, s.topics[name].Kind(), len(d.Partitions), retained, dash(strings.Join(groups, " "))))
	}
	s.render(tw)
	return nil
}

// showTopic prints one snapshot of a topic: a line per partition with no
// events, a line per retained event.
func (s *session) showTopic(a args) error {
	t, err := s.topic(a.pos[0])
	if err != nil {
		return err
	}
	snap, err := t.snapshot()
	if err != nil {
		return err
	}
	groups := make([]string, len(snap.Groups))
	for i, g := range snap.Groups {
		groups[i] = g.Group
	}
	fmt.Fprintf(s.out, "topic %s: type %s, partitions %d, groups %s\n", t.Name(), t.Kind(), len(snap.Partitions), list(groups))
	tw := newTable("PARTITION", "LOG-START", "LOG-END", "OFFSET", "ID", "TIME", "KEY", "HEADERS", "VALUE")
	for p, pd := range snap.Partitions {
		name := s.partName(t.Name(), int32(p))
		if len(snap.Messages[p]) == 0 {
			tw.AppendRow(row(name, pd.LogStartOffset, pd.LogEndOffset, "-", "-", "-", "-", "-", "(empty)"))
		}
		for _, m := range snap.Messages[p] {
			tw.AppendRow(row(name, pd.LogStartOffset, pd.LogEndOffset, m.Offset, m.ID, m.Time.UTC().Format(time.RFC3339), cell(m.Key), headerText(m.Headers), valueCell(m.Value)))
		}
	}
	s.render(tw)
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
// failure policy.
func (s *session) showGroup(a args) error {
	g, d, err := s.describeGroup(a.pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "group %s: topic %s, assignor %s, members %s\n", g.Group, d.Topic, assignorName(g.Assignor), list(g.Members))
	cfg, _, err := s.c.GroupConfig(d.Topic, g.Group)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "from %s; %s\n", cfg.Start, cfg.Policy())
	tw := newTable("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "IN-FLIGHT", "ATTEMPTS")
	for p, gp := range g.Partitions {
		tw.AppendRow(row(d.Topic, s.partName(d.Topic, int32(p)), gp.Committed, d.Partitions[p].LogEndOffset, gp.Lag, dash(gp.Owner), yesNo(gp.InFlight), gp.Attempts))
	}
	s.render(tw)
	return nil
}
