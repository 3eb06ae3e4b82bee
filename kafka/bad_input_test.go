package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn dials s and returns the connection, closed with the test.
func rawConn(t *testing.T, s *Server) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}

// frameOf is a request frame: length, header v1 (or v2 for a flexible
// version), body.
func frameOf(req kmsg.Request, corr int32) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readResponse reads one response frame and returns its body after the
// correlation id (and the tag byte of a flexible non-ApiVersions answer).
func readResponse(t *testing.T, nc net.Conn) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:]
}

// assertClosed checks the server closes nc (a read gives EOF or a reset,
// never a response or a timeout).
func assertClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := nc.Read(make([]byte, 1))
	if err == nil {
		t.Fatalf("the server answered %d bytes instead of closing the connection", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open: %v", err)
	}
}

// assertHealthy checks s still serves a real client: a produce and a
// metadata request.
func assertHealthy(t *testing.T, s *Server) {
	t.Helper()
	cl := client(t, s, kgo.DefaultProduceTopic("healthy"), kgo.AllowAutoTopicCreation())
	ctx := testCtx(t, 10*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("the server no longer serves: %v", err)
	}
}

func TestBadFramesCloseTheConnection(t *testing.T) {
	_, s := serve(t, 100)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	good := frameOf(meta, 1)
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"length below a header", []byte{0, 0, 0, 3, 0, 3, 0}},
		{"negative length", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"length above the limit", binary.BigEndian.AppendUint32(nil, DefaultMaxRequestBytes+1)},
		{"unknown API key", append(binary.BigEndian.AppendUint32(nil, 10), 0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff)},
		{"Metadata v99", append(binary.BigEndian.AppendUint32(nil, 10), 0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff)},
		{"Produce v2 (message sets)", append(binary.BigEndian.AppendUint32(nil, 10), 0, 0, 0, 2, 0, 0, 0, 1, 0xff, 0xff)},
		{"client id past the frame", append(binary.BigEndian.AppendUint32(nil, 10), 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff)},
		{"body cut short", func() []byte {
			b := bytes.Clone(good[:len(good)-3])
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			return b
		}()},
		{"tag count past the frame", append(binary.BigEndian.AppendUint32(nil, 11), 0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0x05)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc := rawConn(t, s)
			if _, err := nc.Write(c.bytes); err != nil {
				t.Fatal(err)
			}
			assertClosed(t, nc)
		})
	}
	// The good frame is answered: the cases above fail for their bytes.
	nc := rawConn(t, s)
	nc.Write(good)
	if corr, _ := readResponse(t, nc); corr != 1 {
		t.Fatalf("correlation id %d, want 1", corr)
	}
	assertHealthy(t, s)
}

func TestTruncatedFrameAndDisconnect(t *testing.T) {
	_, s := serve(t, 100)
	// A length prefix of 100 MB, a few bytes, then the client goes away:
	// the server allocates what came, not what was claimed, and drops the
	// connection.
	nc := rawConn(t, s)
	nc.Write(binary.BigEndian.AppendUint32(nil, 100_000_000))
	nc.Write([]byte{0, 3, 0, 1, 0, 0})
	nc.Close()
	// A client that disconnects while its Fetch waits for records.
	nc2 := rawConn(t, s)
	cl := client(t, s)
	ctx := testCtx(t, 10*time.Second)
	ct := kmsg.NewPtrCreateTopicsRequest()
	tt := kmsg.NewCreateTopicsRequestTopic()
	tt.Topic, tt.NumPartitions, tt.ReplicationFactor = "waiting", 1, 1
	ct.Topics = append(ct.Topics, tt)
	if _, err := ct.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 60_000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "waiting"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	f.ReplicaID = -1
	nc2.Write(frameOf(f, 7))
	waitConns(t, s, 3) // nc2, cl's connection(s) at least
	nc2.Close()
	waitFor(t, testCtx(t, 5*time.Second), "the waiting client's connection closed", func() bool { return conns(s) <= 2 })
	assertHealthy(t, s)
}

// waitConns waits until s serves at least n connections.
func waitConns(t *testing.T, s *Server, n int) {
	t.Helper()
	waitFor(t, testCtx(t, 5*time.Second), fmt.Sprint(n, " connections served"), func() bool { return conns(s) >= n })
}

// conns is how many connections s serves now.
func conns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func TestApiVersionsOfAnUnknownVersion(t *testing.T) {
	_, s := serve(t, 100)
	nc := rawConn(t, s)
	// ApiVersions v127, as a client newer than the server sends it.
	nc.Write(append(binary.BigEndian.AppendUint32(nil, 10), 0, 18, 0, 127, 0, 0, 0, 5, 0xff, 0xff))
	corr, body := readResponse(t, nc)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if corr != 5 || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != len(apis) {
		t.Fatalf("correlation %d, error %d, %d keys; want 5, %d, %d", corr, resp.ErrorCode, len(resp.ApiKeys), kerr.UnsupportedVersion.Code, len(apis))
	}
	// Served versions come back without error, one key each.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	nc.Write(frameOf(req, 6))
	_, body = readResponse(t, nc)
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3: %v, error %d", err, resp.ErrorCode)
	}
	for _, k := range resp.ApiKeys {
		a, ok := apiByKey(k.ApiKey)
		if !ok || a.min != k.MinVersion || a.max != k.MaxVersion {
			t.Fatalf("key %d versions %d..%d not the table's", k.ApiKey, k.MinVersion, k.MaxVersion)
		}
	}
}

// FuzzRequest feeds arbitrary frames to the request decoder and the
// handlers: nothing may panic, and a request that decodes gets a
// response that encodes.
func FuzzRequest(f *testing.F) {
	for _, key := range []int16{0, 1, 2, 3, 18, 19, 22} {
		req := kmsg.RequestForKey(key)
		a, _ := apiByKey(key)
		for v := a.min; v <= a.max; v += 2 {
			req.SetVersion(v)
			f.Add(frameOf(req, 1)[4:])
		}
	}
	c, s := func() (any, *Server) {
		_, s := serve(f, 10, WithAutoCreateTopics(2))
		return nil, s
	}()
	_ = c
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 8 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		cc := &conn{s: s, ctx: ctx, cancel: cancel, local: s.Addr()}
		r, err := cc.decode(b)
		if err != nil {
			return
		}
		resp, err := s.dispatch(r)
		if err != nil || resp == nil {
			return
		}
		out := appendResponse(nil, r.corr, resp)
		if int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("response length prefix %d for %d bytes", binary.BigEndian.Uint32(out), len(out)-4)
		}
	})
}
