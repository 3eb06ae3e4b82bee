package porcupine

import "github.com/f91dcac0/tributary/engine"

// Target is what a recorded Client calls: the engine's calls by name
// (docs/contract.md), plus PollPartition, the one-partition poll of
// MemberHandle.AppendPollPartition. *engine.Broker is one (ClientFor wraps
// it); BackendTarget makes one of any tributary.Backend, so that the same
// workloads and the same model check another backend (RunOn).
//
// A Target reports results exactly as the engine does: a full partition is
// offset -1 with a nil error, an unknown topic is engine.ErrInvalidArgument
// (rule 4), and errors wrap the engine's sentinels (ErrInvalidArgument,
// ErrOffsetOutOfRange, ErrGroupNotEmpty), which is how a history classifies
// them. Every method must be safe for concurrent use.
type Target interface {
	Create(topic string, partitionCount int32) (bool, error)
	Join(topic, group, member string) ([]int32, error)
	Leave(topic, group, member string) (bool, error)
	Publish(topic string, partition int32, payload string) (int64, error)
	PublishMessage(topic string, partition int32, m engine.Message) (int64, error)
	Poll(topic, group, member string, maxRecords int32) ([]engine.Record, error)
	// PollPartition polls partition alone, at most one record (SPEC rule 10
	// restricted to one partition); the records are the caller's.
	PollPartition(topic, group, member string, partition int32) ([]engine.Record, error)
	Ack(topic, group, member string, partition int32, offset int64) (bool, error)
	Retry(topic, group, member string, partition int32, offset int64) (bool, error)
	CreateGroup(topic, group string, a engine.Assignor) (bool, error)
	CreateGroupAt(topic, group string, a engine.Assignor, start engine.GroupStart) (bool, error)
	DeleteGroup(topic, group string) (bool, error)
	SetAssignor(topic, group string, a engine.Assignor) (bool, error)
	AddPartitions(topic string, count int32) (int32, error)
	Seek(topic, group string, partition int32, offset int64) (bool, error)
	Describe(topic string) (engine.TopicDescription, error)
}

// engineTarget is an *engine.Broker as a Target.
type engineTarget struct{ *engine.Broker }

// PollPartition resolves a MemberHandle and calls AppendPollPartition into
// a new buffer. Resolving the handle changes nothing.
func (e engineTarget) PollPartition(topic, group, member string, partition int32) ([]engine.Record, error) {
	th, err := e.Topic(topic)
	if err != nil {
		return nil, err
	}
	m, err := th.Member(group, member)
	if err != nil {
		return nil, err
	}
	return m.AppendPollPartition(nil, partition)
}

// LivenessTarget is a Target that also has the calls of member liveness
// (SPEC rules 24–25): *engine.Broker is one. Client.Heartbeat and
// Client.Rejoin need it; RunOn refuses a workload whose mix makes them on a
// Target that is not one.
type LivenessTarget interface {
	Target
	Heartbeat(topic, group, member string) (bool, error)
	Rejoin(topic, group, member string) ([]int32, error)
}
