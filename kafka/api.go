package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const apiVersionsKey = 18

// api is one API the Server serves: its key, name, the versions served
// (min..max, both included) and its handler. A handler returns the
// response (nil: none is written, Produce with acks 0) or an error, which
// closes the connection (a request Kafka would close it for). Handlers
// run one at a time per connection and may block on r.ctx, which ends
// when the client goes away or the Server closes.
type api struct {
	key      int16
	name     string
	min, max int16
	handle   func(s *Server, r *request) (kmsg.Response, error)
}

// apis is every API served, by key: the table docs/kafka.md lists. Set
// by init (ApiVersions' handler reads it), with apiIndex.
var apis []api

// apiIndex maps a key to its entry in apis.
var apiIndex map[int16]int

func init() {
	apis = []api{
		{0, "Produce", 3, 11, typed(handleProduce)},
		{1, "Fetch", 4, 16, typed(handleFetch)},
		{2, "ListOffsets", 1, 8, typed(handleListOffsets)},
		{3, "Metadata", 0, 12, typed(handleMetadata)},
		{8, "OffsetCommit", 0, 9, typed(handleOffsetCommit)},
		{9, "OffsetFetch", 0, 9, typed(handleOffsetFetch)},
		{10, "FindCoordinator", 0, 6, typed(handleFindCoordinator)},
		{11, "JoinGroup", 0, 9, typed(handleJoinGroup)},
		{12, "Heartbeat", 0, 4, typed(handleHeartbeat)},
		{13, "LeaveGroup", 0, 5, typed(handleLeaveGroup)},
		{14, "SyncGroup", 0, 5, typed(handleSyncGroup)},
		{15, "DescribeGroups", 0, 6, typed(handleDescribeGroups)},
		{16, "ListGroups", 0, 5, typed(handleListGroups)},
		{apiVersionsKey, "ApiVersions", 0, 4, typed(handleApiVersions)},
		{19, "CreateTopics", 2, 7, typed(handleCreateTopics)},
		{22, "InitProducerID", 0, 4, typed(handleInitProducerID)},
		{76, "ShareGroupHeartbeat", 0, 1, typed(handleShareGroupHeartbeat)},
		{77, "ShareGroupDescribe", 0, 1, typed(handleShareGroupDescribe)},
		{78, "ShareFetch", 0, 1, typed(handleShareFetch)},
		{79, "ShareAcknowledge", 0, 1, typed(handleShareAcknowledge)},
	}
	m := map[int16]int{}
	for i, a := range apis {
		if _, dup := m[a.key]; dup {
			panic(fmt.Sprintf("kafka: API key %d twice", a.key))
		}
		if kmsg.RequestForKey(a.key) == nil || a.max > kmsg.RequestForKey(a.key).MaxVersion() {
			panic(fmt.Sprintf("kafka: %s v%d unknown to kmsg", a.name, a.max))
		}
		m[a.key] = i
	}
	apiIndex = m
}

func apiByKey(key int16) (api, bool) {
	i, ok := apiIndex[key]
	if !ok {
		return api{}, false
	}
	return apis[i], true
}

// typed adapts a handler of one request type to the table's signature.
func typed[Req kmsg.Request](f func(s *Server, r *request, req Req) (kmsg.Response, error)) func(*Server, *request) (kmsg.Response, error) {
	return func(s *Server, r *request) (kmsg.Response, error) {
		req, ok := r.kreq.(Req)
		if !ok {
			return nil, fmt.Errorf("request of key %d is a %T", r.key, r.kreq)
		}
		return f(s, r, req)
	}
}

func (s *Server) dispatch(r *request) (kmsg.Response, error) {
	a, _ := apiByKey(r.key) // decode checked it
	s.log.Debug("kafka: request", "api", a.name, "version", r.version, "client", r.clientID, "correlation", r.corr)
	resp, err := a.handle(s, r)
	if err != nil || resp == nil {
		return resp, err
	}
	resp.SetVersion(r.version)
	return resp, nil
}

// handleApiVersions answers every API of the table with its versions;
// a version this Server does not serve gets UNSUPPORTED_VERSION in v0,
// with the same list, so the client retries with one it does.
func handleApiVersions(s *Server, r *request, req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if r.unsupported {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	}
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp, nil
}
