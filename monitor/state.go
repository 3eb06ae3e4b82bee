package monitor

import (
	"slices"
	"time"
)

// State is what GET /api/state serves, as JSON with the field names given
// in the tags. Offsets and lags are in records, rates in records per
// second, times RFC 3339 with nanoseconds.
type State struct {
	Time       time.Time `json:"time"`        // when the state was read
	IntervalMS int64     `json:"interval_ms"` // the sampling interval, in milliseconds
	// Topics are Describe of every topic at Time, sorted by name.
	Topics []Topic `json:"topics"`
	// DeadLetters are the most recent dead letters, newest first.
	DeadLetters []DeadLetter `json:"dead_letters"`
	// DeadLettersTotal counts every dead letter seen since New, those
	// dropped from the ring included.
	DeadLettersTotal int64 `json:"dead_letters_total"`
	// History is the newest samples, oldest first.
	History []Sample `json:"history"`
}

// Topic is one topic's atomic snapshot (SPEC rule 23).
type Topic struct {
	Topic      string      `json:"topic"`
	Partitions []Partition `json:"partitions"` // Partitions[p] is partition p
	Groups     []Group     `json:"groups"`     // sorted by name
}

// Partition is one partition's log: it retains [LogStart, LogEnd).
type Partition struct {
	Partition int32   `json:"partition"`
	LogStart  int64   `json:"log_start"`
	LogEnd    int64   `json:"log_end"`
	Retained  int64   `json:"retained"` // LogEnd − LogStart
	Rate      float64 `json:"rate"`     // records/s appended between the last two samples; 0 before two
}

// Group is one consumer group of a topic.
type Group struct {
	Group      string           `json:"group"`
	Assignor   string           `json:"assignor"`
	Members    []string         `json:"members"`    // sorted
	Lag        int64            `json:"lag"`        // the sum of the partitions' lag
	InFlight   int              `json:"in_flight"`  // partitions with a record in flight
	Partitions []GroupPartition `json:"partitions"` // Partitions[p] is the group on partition p
}

// GroupPartition is a group's state on one partition.
type GroupPartition struct {
	Partition int32  `json:"partition"`
	Owner     string `json:"owner"`     // "" when the group has no members
	Committed int64  `json:"committed"` // the next offset the group is given
	InFlight  bool   `json:"in_flight"` // the record at Committed is in flight to Owner
	Attempts  int32  `json:"attempts"`  // deliveries so far of the record at Committed
	Lag       int64  `json:"lag"`       // log end − Committed
}

// DeadLetter is one record a consumer sent to its group's dead-letter
// topic, as the OnDeadLetter hook told it.
type DeadLetter struct {
	Time            time.Time `json:"time"` // when the hook was called, on the Monitor's clock
	Topic           string    `json:"topic"`
	Group           string    `json:"group"`
	Member          string    `json:"member"`
	Partition       int32     `json:"partition"`
	Offset          int64     `json:"offset"`
	ID              string    `json:"id"`
	Attempt         int32     `json:"attempt"`
	DeadLetterTopic string    `json:"dlq_topic"`
	Cause           string    `json:"cause"` // the last error's text, at most MaxCauseBytes
}

// Sample is the cluster at one instant of the history.
type Sample struct {
	Time   time.Time     `json:"time"`
	Topics []TopicSample `json:"topics"` // sorted by name
}

// TopicSample is one topic of a Sample, from one Describe.
type TopicSample struct {
	Topic  string        `json:"topic"`
	LogEnd []int64       `json:"log_end"` // by partition
	Rate   []float64     `json:"rate"`    // by partition: records/s appended since the sample before (0 in the first)
	Groups []GroupSample `json:"groups"`  // sorted by name
}

// GroupSample is one group of a TopicSample.
type GroupSample struct {
	Group string  `json:"group"`
	Lag   []int64 `json:"lag"` // by partition
}

// clone returns a deep copy of s.
func (s Sample) clone() Sample {
	out := Sample{Time: s.Time, Topics: make([]TopicSample, len(s.Topics))}
	for i, t := range s.Topics {
		c := TopicSample{Topic: t.Topic, LogEnd: slices.Clone(t.LogEnd), Rate: slices.Clone(t.Rate), Groups: make([]GroupSample, len(t.Groups))}
		for j, g := range t.Groups {
			c.Groups[j] = GroupSample{Group: g.Group, Lag: slices.Clone(g.Lag)}
		}
		out.Topics[i] = c
	}
	return out
}

// ring keeps the last len(buf) values pushed. Not safe for concurrent
// use: its owner's lock guards it.
type ring[T any] struct {
	buf  []T
	next int // where the next push goes
	n    int // values held, at most len(buf)
}

func newRing[T any](size int) ring[T] { return ring[T]{buf: make([]T, size)} }

// push adds v, dropping the oldest value when full.
func (r *ring[T]) push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
}

// last returns the newest value; false when empty.
func (r *ring[T]) last() (T, bool) {
	if r.n == 0 {
		var zero T
		return zero, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}

// items returns the values held, oldest first, in a new slice (the values
// themselves shallow copies).
func (r *ring[T]) items() []T {
	out := make([]T, 0, r.n)
	start := (r.next - r.n + len(r.buf)) % len(r.buf)
	for i := range r.n {
		out = append(out, r.buf[(start+i)%len(r.buf)])
	}
	return out
}
