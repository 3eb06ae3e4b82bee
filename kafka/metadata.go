package kafka

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/internal/contract"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// payloadType is what a topic created through Kafka records as its
// payload type: the Bytes codec's name, so the typed library opens it as
// a Topic[[]byte].
const payloadType = "Bytes"

// topicID is the topic id Kafka's v10+ Metadata and v13+ Fetch carry: the
// first 16 bytes of the name's SHA-256, the same on every restart (a
// Tributary topic is never deleted, so a name never changes ids).
func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte(name))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// topic returns the backend's handle on name, cached. errUnknownTopic
// when it does not exist; errInvalidTopic for a name that is not an
// identifier (SPEC rule 3: Kafka allows '.', Tributary does not).
func (s *Server) topic(name string) (tributary.BackendTopic, error) {
	if h, ok := s.topics.Load(name); ok {
		return h.(tributary.BackendTopic), nil
	}
	if !validName(name) {
		return nil, errInvalidTopic
	}
	h, _, err := s.backend.OpenTopic(name)
	if err != nil {
		if errors.Is(err, tributary.ErrUnknownTopic) {
			return nil, errUnknownTopic
		}
		return nil, err
	}
	s.ids.Store(topicID(name), name)
	actual, _ := s.topics.LoadOrStore(name, h)
	return actual.(tributary.BackendTopic), nil
}

// topicOrCreate is topic that auto-creates an absent topic with the
// Server's auto-create partitions, when allowed; never one whose name
// starts with "__" (Kafka's internal topics, such as __consumer_offsets,
// which clients ask for by name).
func (s *Server) topicOrCreate(name string, allow bool) (tributary.BackendTopic, error) {
	h, err := s.topic(name)
	if !errors.Is(err, errUnknownTopic) || !allow || s.autoCreate == 0 || strings.HasPrefix(name, "__") {
		return h, err // "__" names Kafka's internal topics: never made by a mention
	}
	if _, err := s.backend.CreateTopic(name, s.autoCreate, payloadType); err != nil {
		return nil, err
	}
	s.log.Info("kafka: topic auto-created", "topic", name, "partitions", s.autoCreate)
	return s.topic(name)
}

// topicByID resolves a v13+ Fetch's topic id: a topic this Server has
// resolved by name before, or any of the backend's topics.
func (s *Server) topicByID(id [16]byte) (string, bool) {
	if n, ok := s.ids.Load(id); ok {
		return n.(string), true
	}
	for _, name := range s.backend.Topics() {
		if topicID(name) == id {
			s.ids.Store(id, name)
			return name, true
		}
	}
	return "", false
}

var (
	errUnknownTopic = errors.New("unknown topic")
	errInvalidTopic = errors.New("invalid topic name")
)

// validName is SPEC rule 3 (1 to 64 of A-Z a-z 0-9 _ -), the engine's
// own identifier check.
func validName(s string) bool {
	return contract.CheckID(tributary.ErrInvalidArgument, "", s) == nil
}

// errorCode maps a backend error to Kafka's code: an unknown topic to
// UNKNOWN_TOPIC_OR_PARTITION, an invalid name to INVALID_TOPIC_EXCEPTION,
// an unreachable backend to a retriable KAFKA_STORAGE_ERROR (the client
// retries), anything else to UNKNOWN_SERVER_ERROR.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUnknownTopic), errors.Is(err, tributary.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, errInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, tributary.ErrUnavailable):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, tributary.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, tributary.ErrInvalidArgument):
		return kerr.InvalidRequest.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// handleMetadata lists this one broker, leader of every partition, and
// the topics asked for (all, when the request names none: v0's empty
// list, v1+'s null), auto-creating absent ones when the request allows it
// (always before v4, as Kafka).
func handleMetadata(s *Server, r *request, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	host, port := r.cc.advertisedHostPort()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = NodeID, host, port
	resp.Brokers = append(resp.Brokers, b)
	resp.ClusterID = &s.clusterID
	resp.ControllerID = NodeID

	var names []string
	var ids [][16]byte
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		names = s.backend.Topics()
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
				ids = append(ids, [16]byte{})
			} else {
				names = append(names, "")
				ids = append(ids, t.TopicID)
			}
		}
	}
	allow := req.Version < 4 || req.AllowAutoTopicCreation
	for i, name := range names {
		rt := kmsg.NewMetadataResponseTopic()
		if name == "" && ids != nil && ids[i] != ([16]byte{}) {
			n, ok := s.topicByID(ids[i])
			if !ok {
				rt.ErrorCode = kerr.UnknownTopicID.Code
				rt.TopicID = ids[i]
				resp.Topics = append(resp.Topics, rt)
				continue
			}
			name = n
		}
		rt.Topic = kmsg.StringPtr(name)
		h, err := s.topicOrCreate(name, allow && !all)
		if err != nil {
			rt.ErrorCode = errorCode(err)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = topicID(name)
		for p := range h.Partitions() {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition = p
			rp.Leader = NodeID
			rp.LeaderEpoch = 0
			rp.Replicas = []int32{NodeID}
			rp.ISR = []int32{NodeID}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// handleCreateTopics creates each topic with the Bytes payload type.
// NumPartitions -1 takes the auto-create default (1 when auto-creation is
// off); a replication factor other than -1 or 1 is INVALID_REPLICATION_FACTOR
// (one broker), a manual replica assignment INVALID_REQUEST, a partition
// count outside 1..64 INVALID_PARTITIONS, an existing topic
// TOPIC_ALREADY_EXISTS. Topic configs are accepted and not kept.
func handleCreateTopics(s *Server, r *request, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n := t.NumPartitions
		if n == -1 {
			n = max(s.autoCreate, 1)
		}
		rt.NumPartitions, rt.ReplicationFactor = n, 1
		fail := func(e *kerr.Error, msg string) {
			rt.ErrorCode, rt.ErrorMessage = e.Code, kmsg.StringPtr(msg)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
		}
		switch {
		case !validName(t.Topic):
			fail(kerr.InvalidTopicException, fmt.Sprintf("topic name %q: 1 to 64 of A-Z a-z 0-9 _ - (Tributary's identifiers)", t.Topic))
		case t.ReplicationFactor != -1 && t.ReplicationFactor != 1:
			fail(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor %d: this cluster has one broker", t.ReplicationFactor))
		case len(t.ReplicaAssignment) > 0:
			fail(kerr.InvalidRequest, "manual replica assignment is not supported")
		case n < 1 || n > 64:
			fail(kerr.InvalidPartitions, fmt.Sprintf("%d partitions: Tributary topics have 1..64", n))
		case req.ValidateOnly:
			if _, err := s.topic(t.Topic); err == nil {
				fail(kerr.TopicAlreadyExists, "topic "+t.Topic+" exists")
			}
		default:
			created, err := s.backend.CreateTopic(t.Topic, n, payloadType)
			switch {
			case err != nil:
				fail(kerr.ErrorForCode(errorCode(err)).(*kerr.Error), err.Error())
			case !created:
				fail(kerr.TopicAlreadyExists, "topic "+t.Topic+" exists")
			default:
				s.log.Info("kafka: topic created", "topic", t.Topic, "partitions", n)
			}
		}
		if rt.ErrorCode == 0 {
			rt.TopicID = topicID(t.Topic)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
