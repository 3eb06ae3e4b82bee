package porcupine

import (
	"errors"
	"fmt"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// BackendTarget returns b, a typed library backend (tributary.Backend: the
// in-memory engine's, or a distributed one), as a Target, so that RunOn
// records workloads on it and Check holds them to the same model as the
// engine. Each call resolves the topic (Backend.OpenTopic) and, for member
// calls, the member (BackendTopic.Member), then makes the one backend call
// that does the work; resolving changes nothing, so the call takes effect
// where that backend call does.
//
// Results are reported as the engine reports them (see Target):
// tributary.ErrUnknownTopic becomes engine.ErrInvalidArgument (SPEC rule 4)
// and tributary.ErrPartitionFull becomes offset -1 with a nil error (rule
// 5). Topics are created with the payload type "porcupine".
func BackendTarget(b tributary.Backend) Target { return backendTarget{b} }

type backendTarget struct{ b tributary.Backend }

// engineErr maps a backend's error onto the engine's sentinels.
func engineErr(err error) error {
	if errors.Is(err, tributary.ErrUnknownTopic) {
		return fmt.Errorf("%w: %w", engine.ErrInvalidArgument, err)
	}
	return err
}

func (t backendTarget) topic(name string) (tributary.BackendTopic, error) {
	bt, _, err := t.b.OpenTopic(name)
	return bt, engineErr(err)
}

func (t backendTarget) member(topic, group, member string) (tributary.BackendMember, error) {
	bt, err := t.topic(topic)
	if err != nil {
		return nil, err
	}
	m, err := bt.Member(group, member)
	return m, engineErr(err)
}

func (t backendTarget) Create(topic string, partitionCount int32) (bool, error) {
	ok, err := t.b.CreateTopic(topic, partitionCount, "porcupine")
	return ok, engineErr(err)
}

func (t backendTarget) Join(topic, group, member string) ([]int32, error) {
	m, err := t.member(topic, group, member)
	if err != nil {
		return nil, err
	}
	parts, err := m.Join()
	return parts, engineErr(err)
}

func (t backendTarget) Leave(topic, group, member string) (bool, error) {
	m, err := t.member(topic, group, member)
	if err != nil {
		return false, err
	}
	ok, err := m.Leave()
	return ok, engineErr(err)
}

func (t backendTarget) Publish(topic string, partition int32, payload string) (int64, error) {
	return t.PublishMessage(topic, partition, engine.Message{Payload: payload})
}

func (t backendTarget) PublishMessage(topic string, partition int32, m engine.Message) (int64, error) {
	bt, err := t.topic(topic)
	if err != nil {
		return -1, err
	}
	off, err := bt.TryPublish(partition, m)
	if errors.Is(err, tributary.ErrPartitionFull) {
		return -1, nil
	}
	if err != nil {
		return -1, engineErr(err)
	}
	return off, nil
}

func (t backendTarget) Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error) {
	m, err := t.member(topic, group, member)
	if err != nil {
		return nil, err
	}
	recs, err := m.TryPoll(nil, maxRecords)
	return recs, engineErr(err)
}

func (t backendTarget) PollPartition(topic, group, member string, partition int32) ([]engine.Record, error) {
	m, err := t.member(topic, group, member)
	if err != nil {
		return nil, err
	}
	recs, err := m.TryPollPartition(nil, partition)
	return recs, engineErr(err)
}

func (t backendTarget) Ack(topic, group, member string, partition int32, offset int64) (bool, error) {
	m, err := t.member(topic, group, member)
	if err != nil {
		return false, err
	}
	ok, err := m.Ack(partition, offset)
	return ok, engineErr(err)
}

func (t backendTarget) Retry(topic, group, member string, partition int32, offset int64) (bool, error) {
	m, err := t.member(topic, group, member)
	if err != nil {
		return false, err
	}
	ok, err := m.Retry(partition, offset)
	return ok, engineErr(err)
}

func (t backendTarget) CreateGroup(topic, group string, a engine.Assignor) (bool, error) {
	ok, err := t.b.CreateGroup(topic, group, a)
	return ok, engineErr(err)
}

func (t backendTarget) CreateGroupAt(topic, group string, a engine.Assignor, start engine.GroupStart) (bool, error) {
	ok, err := t.b.CreateGroup(topic, group, a, tributary.WithStart(start))
	return ok, engineErr(err)
}

func (t backendTarget) DeleteGroup(topic, group string) (bool, error) {
	ok, err := t.b.DeleteGroup(topic, group)
	return ok, engineErr(err)
}

func (t backendTarget) SetAssignor(topic, group string, a engine.Assignor) (bool, error) {
	ok, err := t.b.SetAssignor(topic, group, a)
	return ok, engineErr(err)
}

func (t backendTarget) AddPartitions(topic string, count int32) (int32, error) {
	n, err := t.b.AddPartitions(topic, count)
	return n, engineErr(err)
}

func (t backendTarget) Seek(topic, group string, partition int32, offset int64) (bool, error) {
	ok, err := t.b.Seek(topic, group, partition, offset)
	return ok, engineErr(err)
}

func (t backendTarget) Describe(topic string) (engine.TopicDescription, error) {
	d, err := t.b.Describe(topic)
	return d, engineErr(err)
}

// ForgetfulBackend returns b with one deliberate fault, for showing that a
// check of a backend can fail: every TryPoll at once retries (cancels) each
// delivery it makes, as if a rebalance had, with no rebalance, so the
// owner's Ack of a record it just polled returns false. Check finds such
// histories Illegal. Not for anything but tests.
func ForgetfulBackend(b tributary.Backend) tributary.Backend { return forgetful{b} }

type forgetful struct{ tributary.Backend }

func (f forgetful) OpenTopic(topic string) (tributary.BackendTopic, string, error) {
	t, pt, err := f.Backend.OpenTopic(topic)
	if err != nil {
		return nil, pt, err
	}
	return forgetfulTopic{t}, pt, nil
}

type forgetfulTopic struct{ tributary.BackendTopic }

func (t forgetfulTopic) Member(group, member string) (tributary.BackendMember, error) {
	m, err := t.BackendTopic.Member(group, member)
	if err != nil {
		return nil, err
	}
	return forgetfulMember{m}, nil
}

type forgetfulMember struct{ tributary.BackendMember }

func (m forgetfulMember) TryPoll(dst []engine.Record, max int32) ([]engine.Record, error) {
	recs, err := m.BackendMember.TryPoll(dst, max)
	for _, r := range recs[len(dst):] {
		_, _ = m.BackendMember.Retry(r.Partition, r.Offset)
	}
	return recs, err
}
