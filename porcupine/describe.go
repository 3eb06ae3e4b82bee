package porcupine

import (
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// Describe renders one call and its result on one line, the way the HTML
// visualization labels an operation, e.g.
//
//	Poll(g0 m1 max=4) → p0@3 "c1.2", p2@1 "c0.5"#2
//	PollPartition(g0 m1 p2) → p2@1 "c0.5"#3
//	Ack(g0 m1 p0@3) → true
//	Publish(p1 "c3.7") → -1 full
//	PublishMessage(p0 key=k1 [h0:v] "c2.4") → 5
//	Seek(g1 p0@2) → offset-out-of-range
//	Describe() → p0[2,5) p1[0,1) | g0 range [m0 m1] p0:m0@3* p1:m1@1
//	Describe() → p0[0,1) | g0 RoundRobin [m0 seen +5s] p0:m0@0
//	Heartbeat(g0 m1) → false
//	Rejoin(g0 m1) → [1]
//	Advance(+5s) → +15s
//
// A record's attempt follows "#" when it is recorded (version 1 histories);
// a describe shows each partition's [log start, log end) and, per group,
// each partition's owner@committed, * when in flight and /attempts when
// not 0; under a session timeout each member's last-seen follows it. The
// topic is shown only for Create: a visualization shows one
// topic per partition of the history.
func Describe(in Input, out Output) string {
	var args string
	g, m := showID(in.Group), showID(in.Member)
	switch in.Kind {
	case KindCreate:
		args = fmt.Sprintf("%s, %d", showID(in.Topic), in.N)
	case KindJoin, KindLeave, KindHeartbeat, KindRejoin:
		args = g + " " + m
	case KindPublish:
		args = fmt.Sprintf("p%d %q", in.Partition, in.Payload)
	case KindPublishMessage:
		args = fmt.Sprintf("p%d", in.Partition)
		if in.Key != "" {
			args += " key=" + strconv.Quote(in.Key)
		}
		if len(in.Headers) > 0 {
			args += " " + showHeaders(in.Headers)
		}
		args += " " + strconv.Quote(in.Payload)
		if !in.Time.IsZero() {
			args += " at " + showTime(in.Time)
		}
	case KindPoll:
		args = fmt.Sprintf("%s %s max=%d", g, m, in.N)
	case KindPollPartition:
		args = fmt.Sprintf("%s %s p%d", g, m, in.Partition)
	case KindAck, KindRetry:
		args = fmt.Sprintf("%s %s p%d@%d", g, m, in.Partition, in.Offset)
	case KindCreateGroup, KindSetAssignor:
		a := in.Assignor
		if a == "" {
			a = "nil"
		}
		args = g + " " + a
	case KindCreateGroupAt:
		a := in.Assignor
		if a == "" {
			a = "nil"
		}
		args = g + " " + a + " " + engine.GroupStart(in.Start).String()
	case KindDeleteGroup:
		args = g
	case KindAddPartitions:
		args = fmt.Sprintf("+%d", in.N)
	case KindSeek:
		args = fmt.Sprintf("%s p%d@%d", g, in.Partition, in.Offset)
	case KindAdvance:
		args = "+" + in.Advance.String()
	}
	var res string
	switch {
	case out.Err == ErrInvalid:
		res = "invalid"
	case out.Err == ErrOther:
		res = "error: " + out.ErrText
	case out.Err != ErrNone:
		res = out.Err.String()
	case in.Kind == KindJoin || in.Kind == KindRejoin:
		res = fmt.Sprint(out.Partitions)
		if out.Partitions == nil {
			res = "[]"
		}
	case in.Kind == KindPublish || in.Kind == KindPublishMessage:
		res = strconv.FormatInt(out.Offset, 10)
		if out.Offset < 0 {
			res += " full"
		}
	case in.Kind == KindPoll || in.Kind == KindPollPartition:
		if len(out.Records) == 0 {
			res = "none"
		}
		for i, r := range out.Records {
			if i > 0 {
				res += ", "
			}
			res += showRecord(r)
		}
	case in.Kind == KindAddPartitions:
		res = strconv.Itoa(int(out.N))
	case in.Kind == KindDescribe:
		res = showDescription(out.Desc)
	case in.Kind == KindAdvance:
		res = "+" + out.Now.String()
	default:
		res = strconv.FormatBool(out.OK)
	}
	return fmt.Sprintf("%v(%s) → %s", in.Kind, args, res)
}

func showRecord(r Record) string {
	s := fmt.Sprintf("p%d@%d", r.Partition, r.Offset)
	if r.Key != "" {
		s += " key=" + strconv.Quote(r.Key)
	}
	if len(r.Headers) > 0 {
		s += " " + showHeaders(r.Headers)
	}
	s += " " + strconv.Quote(r.Payload)
	if r.Attempt != 0 {
		s += "#" + strconv.Itoa(int(r.Attempt))
	}
	if !r.Time.IsZero() {
		s += " at " + showTime(r.Time)
	}
	return s
}

func showHeaders(hs []Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = showID(h.Key) + ":" + showID(h.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// showTime shows a time relative to Epoch, e.g. "+1.5s".
func showTime(t time.Time) string {
	d := t.Sub(Epoch)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

func showDescription(d *TopicDescription) string {
	if d == nil {
		return "nil"
	}
	var sb strings.Builder
	for i, p := range d.Partitions {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "p%d[%d,%d)", p.Partition, p.LogStartOffset, p.LogEndOffset)
	}
	for _, g := range d.Groups {
		members, sep := slices.Clone(g.Members), " "
		for i, t := range g.LastSeen {
			if i < len(members) {
				members[i] += " seen " + showTime(t)
				sep = ", "
			}
		}
		fmt.Fprintf(&sb, " | %s %s [%s]", showID(g.Group), g.Assignor, strings.Join(members, sep))
		for _, p := range g.Partitions {
			owner := p.Owner
			if owner == "" {
				owner = "-"
			}
			fmt.Fprintf(&sb, " p%d:%s@%d", p.Partition, owner, p.Committed)
			if p.InFlight {
				sb.WriteByte('*')
			}
			if p.Attempts != 0 {
				fmt.Fprintf(&sb, "/%d", p.Attempts)
			}
		}
	}
	return sb.String()
}

// describeState renders the state's model.Broker.String (and the test
// clock's reading, when not 0) as HTML (porcupine inserts the state
// description into the page as markup): escaped, one line per row.
func describeState(st interface{}) string {
	s := st.(*state)
	text := strings.TrimSuffix(s.b.String(), "\n")
	if s.now != 0 {
		text = "clock=+" + s.now.String() + "\n" + text
	}
	text = html.EscapeString(text)
	text = strings.ReplaceAll(text, "  ", "&nbsp;&nbsp;")
	return strings.ReplaceAll(text, "\n", "<br>")
}

// showID prints an identifier bare when it is a plain word, and quoted when
// it is empty or holds anything else, so that invalid ids stand out.
func showID(id string) string {
	if id == "" {
		return `""`
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.Quote(id)
		}
	}
	return id
}
