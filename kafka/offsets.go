package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitCheckLocked is Kafka's generation check of an OffsetCommit on a
// group the coordinator knows: a simple commit (generation < 0) needs an
// Empty group; otherwise the group must not be completing a rebalance
// (REBALANCE_IN_PROGRESS), the member must be known (UNKNOWN_MEMBER_ID)
// and the generation current (ILLEGAL_GENERATION). A valid commit counts
// as the member's heartbeat.
func (g *group) commitCheckLocked(req *kmsg.OffsetCommitRequest) int16 {
	if code := g.checkInstanceLocked(req.InstanceID, req.MemberID); code != 0 {
		return code
	}
	switch {
	case g.state == groupDead:
		return kerr.CoordinatorNotAvailable.Code
	case req.Generation < 0 && g.state == groupEmpty:
		return 0
	case g.state == groupCompletingRebalance:
		return kerr.RebalanceInProgress.Code
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	if m.waiting == nil {
		m.touchLocked()
	}
	return 0
}

// handleOffsetCommit stores each partition's offset in the Cluster: the
// Kafka group is the Tributary group of the same name on the topic,
// created with RoundRobinAssignor on its first commit there
// (Cluster.CreateGroup), and the commit is Cluster.Seek. So a commit
// drives Tributary's retention (a record is removed once every group of
// its topic has committed past it, which frees room for producers) and
// shows in Cluster.Describe. Leader epochs and metadata strings are not
// kept; v1's timestamp and v2–v4's retention time are ignored.
//
// Errors, for every partition: INVALID_GROUP_ID (not a Tributary
// identifier), ILLEGAL_GENERATION (a generation ≥ 0 for a group the
// coordinator does not know, or not the current one), UNKNOWN_MEMBER_ID,
// REBALANCE_IN_PROGRESS (the group completes a rebalance),
// FENCED_INSTANCE_ID (a static member replaced by a newer instance). Per
// partition:
// INVALID_TOPIC_EXCEPTION (a topic name that is not an identifier),
// UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE (outside [log start, log
// end]: Seek's ErrOffsetOutOfRange; a negative offset).
func handleOffsetCommit(s *Server, r *request, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := checkGroupID(req.Group)
	if code == 0 {
		if g := s.groups.group(req.Group, false); g != nil {
			g.mu.Lock()
			defer g.mu.Unlock() // commits of a group are stored in order
			code = g.commitCheckLocked(req)
		} else if req.Generation >= 0 || req.InstanceID != nil {
			code = kerr.IllegalGeneration.Code
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			if code == 0 {
				rp.ErrorCode = s.commit(t.Topic, req.Group, p.Partition, p.Offset)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// commit stores one committed offset: CreateGroup if absent, then Seek
// (again once, should the group be deleted in between).
func (s *Server) commit(topic, group string, partition int32, offset int64) int16 {
	h, err := s.topic(topic)
	if err != nil {
		return errorCode(err)
	}
	if partition < 0 || partition >= h.Partitions() {
		return kerr.UnknownTopicOrPartition.Code
	}
	if offset < 0 {
		return kerr.OffsetOutOfRange.Code
	}
	for range 2 {
		if _, err := s.c.CreateGroup(topic, group, tributary.RoundRobinAssignor); err != nil {
			return errorCode(err)
		}
		ok, err := s.c.Seek(topic, group, partition, offset)
		switch {
		case errors.Is(err, tributary.ErrOffsetOutOfRange):
			return kerr.OffsetOutOfRange.Code
		case err != nil:
			return errorCode(err)
		case ok:
			return 0
		}
	}
	return kerr.UnknownServerError.Code
}

// fetchedTopic is one topic of an OffsetFetch answer.
type fetchedTopic struct {
	topic string
	parts []int32
	offs  []int64
}

// committed returns group's committed offsets: of the partitions asked
// for (topics non-nil), -1 where the topic, the partition or the
// Tributary group on the topic is absent; or (topics nil) of every
// partition of every topic the group exists on.
func (s *Server) committed(group string, topics []fetchedTopic) []fetchedTopic {
	find := func(d tributary.TopicDescription) *tributary.GroupDescription {
		i, ok := slices.BinarySearchFunc(d.Groups, group, func(g tributary.GroupDescription, name string) int { return strings.Compare(g.Group, name) })
		if !ok {
			return nil
		}
		return &d.Groups[i]
	}
	if topics == nil {
		var out []fetchedTopic
		for _, name := range s.backend.Topics() {
			d, err := s.c.Describe(name)
			if err != nil {
				continue
			}
			gd := find(d)
			if gd == nil {
				continue
			}
			ft := fetchedTopic{topic: name}
			for _, p := range gd.Partitions {
				ft.parts = append(ft.parts, p.Partition)
				ft.offs = append(ft.offs, p.Committed)
			}
			out = append(out, ft)
		}
		return out
	}
	for i := range topics {
		t := &topics[i]
		t.offs = make([]int64, len(t.parts))
		var gd *tributary.GroupDescription
		if validName(t.topic) {
			if d, err := s.c.Describe(t.topic); err == nil {
				gd = find(d)
			}
		}
		for j, p := range t.parts {
			t.offs[j] = -1
			if gd != nil && p >= 0 && int(p) < len(gd.Partitions) {
				t.offs[j] = gd.Partitions[p].Committed
			}
		}
	}
	return topics
}

// handleOffsetFetch answers each group's committed offsets (v8+: several
// groups; before, one): the Tributary group's committed offset on the
// partition, from Cluster.Describe, when the group exists on the topic,
// else -1 (an unknown topic or partition too, with no error, as Kafka's
// never-committed partitions); every partition of every topic the group
// exists on when the request names no topics. Leader epoch -1, empty
// metadata. Errors: INVALID_GROUP_ID (the group's, at the top level on
// v2–v7, per partition on v0–v1).
func handleOffsetFetch(s *Server, r *request, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			if g.ErrorCode = checkGroupID(rg.Group); g.ErrorCode == 0 {
				var ts []fetchedTopic
				if rg.Topics != nil {
					ts = []fetchedTopic{}
					for _, t := range rg.Topics {
						ts = append(ts, fetchedTopic{topic: t.Topic, parts: t.Partitions})
					}
				}
				for _, ft := range s.committed(rg.Group, ts) {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = ft.topic
					for j, p := range ft.parts {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch = p, ft.offs[j], -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					g.Topics = append(g.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	code := checkGroupID(req.Group)
	var ts []fetchedTopic
	if req.Topics != nil {
		ts = []fetchedTopic{}
		for _, t := range req.Topics {
			ts = append(ts, fetchedTopic{topic: t.Topic, parts: t.Partitions})
		}
	}
	if code == 0 {
		ts = s.committed(req.Group, ts)
	}
	for _, ft := range ts {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.topic
		for j, p := range ft.parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			if code == 0 {
				rp.Offset = ft.offs[j]
			} else if req.Version < 2 {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	return resp, nil
}

// tributaryGroups returns the names of the groups of every topic of the
// Cluster.
func (s *Server) tributaryGroups() map[string]struct{} {
	out := map[string]struct{}{}
	for _, name := range s.backend.Topics() {
		d, err := s.c.Describe(name)
		if err != nil {
			continue
		}
		for _, g := range d.Groups {
			out[g.Group] = struct{}{}
		}
	}
	return out
}

// handleDescribeGroups describes each group the coordinator knows: its
// state (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead),
// protocol type and protocol, and its members with client id and host
// (in Stable also each one's metadata for the protocol and its
// assignment, as Kafka). A group only the Cluster has (a Tributary group
// of that name on some topic) is Empty with no protocol; any other is
// Dead (v6+: with GROUP_ID_NOT_FOUND, as Kafka). Errors: INVALID_GROUP_ID
// (not a Tributary identifier).
func handleDescribeGroups(s *Server, r *request, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	var inCluster map[string]struct{}
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		if rg.ErrorCode = checkGroupID(id); rg.ErrorCode != 0 {
			rg.State = groupDead.String()
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if g := s.groups.group(id, false); g != nil {
			g.mu.Lock()
			rg.State, rg.ProtocolType, rg.Protocol = g.state.String(), g.protocolType, g.protocol
			for _, mid := range g.memberIDsLocked() {
				m := g.members[mid]
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
				if g.state == groupStable {
					for _, p := range m.join.Protocols {
						if p.Name == g.protocol {
							rm.ProtocolMetadata = p.Metadata
						}
					}
					rm.MemberAssignment = m.assignment
				}
				rg.Members = append(rg.Members, rm)
			}
			g.mu.Unlock()
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if inCluster == nil {
			inCluster = s.tributaryGroups()
		}
		if _, ok := inCluster[id]; ok {
			rg.State = groupEmpty.String()
		} else {
			rg.State = groupDead.String()
			if req.Version >= 6 {
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				rg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %s does not exist", id))
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// handleListGroups lists the coordinator's groups (protocol type, state)
// and the Cluster's Tributary groups it does not know (state Empty, no
// protocol type: groups of Tributary consumers, or committed to by a
// simple commit); v4+'s states filter (case-insensitive) and v5+'s types
// filter ("classic": every group listed is one) apply.
func handleListGroups(s *Server, r *request, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "classic") }) {
		return resp, nil
	}
	add := func(name, ptype string, st groupState) {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(f string) bool { return strings.EqualFold(f, st.String()) }) {
			return
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = name, ptype, st.String(), "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	known := map[string]struct{}{}
	for _, g := range s.groups.snapshot() {
		g.mu.Lock()
		name, ptype, st := g.name, g.protocolType, g.state
		g.mu.Unlock()
		known[name] = struct{}{}
		add(name, ptype, st)
	}
	for name := range s.tributaryGroups() {
		if _, ok := known[name]; !ok {
			add(name, "", groupEmpty)
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp, nil
}
