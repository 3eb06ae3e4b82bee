package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxRequestBytes is the largest request frame a Server reads
// unless WithMaxRequestBytes says otherwise: Kafka's
// socket.request.max.bytes, 100 MiB. A length prefix above the limit closes
// the connection before anything of the frame is read or allocated.
const DefaultMaxRequestBytes = 100 << 20

// NodeID is the broker id the Server gives itself in Metadata and
// FindCoordinator: the one node of its cluster, leader of every partition.
const NodeID int32 = 0

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("kafka: server closed")

// Server serves a tributary Cluster over Kafka's wire protocol: one
// goroutine pair per connection, requests of one connection answered in
// order (as a Kafka broker does), requests of different connections
// concurrently. Make one with NewServer, then Serve a listener (or use
// Listen). Safe for concurrent use.
type Server struct {
	c       *tributary.Cluster
	backend tributary.Backend
	reader  tributary.OffsetReader // nil when the backend has none: Snapshot reads
	log     *slog.Logger

	advertised      string // host:port given to clients in Metadata; "" → the listener's address
	maxRequestBytes int32
	autoCreate      int32 // partitions of an auto-created topic; 0: no auto-creation
	clusterID       string

	// appendMu serializes the appends of one partition from this front
	// end, so that a Produce batch gets consecutive offsets (Kafka's
	// BaseOffset + index); keyed by topic and partition. Guards nothing
	// but the order of appends; taken before any backend call.
	appendMu sync.Map // partKey → chan struct{} of one slot (appendLock)

	topics sync.Map // topic name → tributary.BackendTopic, resolved once
	ids    sync.Map // topic id → topic name

	producers producers // InitProducerID's ids and each one's sequences
	groups    *coordinator
	share     *shareCoordinator // share groups (KIP-932), share.go

	// mu guards listeners, conns, closed and addr.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closed    bool
	addr      string

	ctx    context.Context // cancelled by Close: every handler's context derives from it
	cancel context.CancelFunc
	wg     sync.WaitGroup // every connection's goroutines (its run and its reader)
}

// Option configures a Server.
type Option func(*Server) error

// WithLogger sets where the Server logs (connections refused or closed for
// a protocol error, at Info; each request, at Debug). Default: discarded.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", tributary.ErrInvalidArgument)
		}
		s.log = l
		return nil
	}
}

// WithAdvertisedAddr sets the host:port the Server tells clients to
// connect to (Metadata's broker, FindCoordinator's coordinator): Kafka's
// advertised.listeners. Default: the address of the listener the request
// came in on.
func WithAdvertisedAddr(addr string) Option {
	return func(s *Server) error {
		if _, _, err := splitHostPort(addr); err != nil {
			return fmt.Errorf("%w: advertised address %q: %v", tributary.ErrInvalidArgument, addr, err)
		}
		s.advertised = addr
		return nil
	}
}

// WithMaxRequestBytes sets the largest request frame read, in bytes
// (1 KiB..1 GiB; default DefaultMaxRequestBytes): a longer length prefix
// closes the connection. It also bounds what one partition's record
// batches of a Produce may decompress to (MESSAGE_TOO_LARGE beyond).
func WithMaxRequestBytes(n int32) Option {
	return func(s *Server) error {
		if n < 1<<10 || n > 1<<30 {
			return fmt.Errorf("%w: max request bytes %d outside 1 KiB..1 GiB", tributary.ErrInvalidArgument, n)
		}
		s.maxRequestBytes = n
		return nil
	}
}

// WithAutoCreateTopics sets the partitions (1..64) of a topic that a
// Metadata request allowing auto-creation, or a Produce, names before it
// exists (Kafka's auto.create.topics.enable with num.partitions); 0 turns
// auto-creation off (UNKNOWN_TOPIC_OR_PARTITION). Default 1, as Kafka.
func WithAutoCreateTopics(partitions int32) Option {
	return func(s *Server) error {
		if partitions < 0 || partitions > 64 {
			return fmt.Errorf("%w: auto-created partitions %d outside 0..64", tributary.ErrInvalidArgument, partitions)
		}
		s.autoCreate = partitions
		return nil
	}
}

// WithClusterID sets the cluster id Metadata reports. Default "tributary".
func WithClusterID(id string) Option {
	return func(s *Server) error {
		if id == "" {
			return fmt.Errorf("%w: empty cluster id", tributary.ErrInvalidArgument)
		}
		s.clusterID = id
		return nil
	}
}

// NewServer returns a Server for c, on whatever backend c runs on. It
// opens no socket: call Serve. Errors: ErrInvalidArgument (a nil cluster,
// an option's bad value).
func NewServer(c *tributary.Cluster, opts ...Option) (*Server, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil cluster", tributary.ErrInvalidArgument)
	}
	s := &Server{
		c:               c,
		backend:         c.Backend(),
		log:             slog.New(slog.DiscardHandler),
		maxRequestBytes: DefaultMaxRequestBytes,
		autoCreate:      1,
		clusterID:       "tributary",
		listeners:       map[net.Listener]struct{}{},
		conns:           map[*conn]struct{}{},
	}
	s.share = &shareCoordinator{s: s, groups: map[string]*shareGroup{}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", tributary.ErrInvalidArgument)
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.reader, _ = s.backend.(tributary.OffsetReader)
	s.producers.init()
	s.groups = newCoordinator(s)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Listen is NewServer and Serve on a new TCP listener at addr
// ("127.0.0.1:0" picks a port): it returns once the listener is open, with
// Serve running in its own goroutine; Addr tells the address. Close stops
// it. Errors: NewServer's, net.Listen's.
func Listen(c *tributary.Cluster, addr string, opts ...Option) (*Server, error) {
	s, err := NewServer(c, opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := s.track(ln); err != nil {
		ln.Close()
		return nil, err
	}
	go s.serve(ln) //nolint:errcheck // ErrServerClosed after Close, or an accept error already logged
	return s, nil
}

// Addr is the address of the last listener Serve or Listen took ("" before
// any).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serve accepts connections on ln and serves each until the client closes
// it, a protocol error closes it, or Close. It returns ErrServerClosed
// after Close, or the listener's accept error; ln is closed either way.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.track(ln); err != nil {
		ln.Close()
		return err
	}
	return s.serve(ln)
}

func (s *Server) track(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.addr = ln.Addr().String()
	return nil
}

func (s *Server) serve(ln net.Listener) error {
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			s.log.Error("kafka: accept", "err", err)
			return err
		}
		cc := &conn{s: s, nc: nc, local: ln.Addr().String()}
		cc.ctx, cc.cancel = context.WithCancel(s.ctx)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[cc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go cc.run()
	}
}

// Close stops every listener and connection: handlers waiting (a Fetch's
// max wait, a Produce waiting for room, a JoinGroup) return at once, and
// Close waits for every connection's goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	for ln := range s.listeners {
		ln.Close()
	}
	for cc := range s.conns {
		cc.nc.Close()
	}
	s.mu.Unlock()
	s.groups.close()
	s.wg.Wait()
	return nil
}

// conn is one client connection: run reads frames in one goroutine and
// answers them, in order, in another.
type conn struct {
	s      *Server
	nc     net.Conn
	local  string // the listener's address: the advertised default
	ctx    context.Context
	cancel context.CancelFunc
}

// frame is one request read off a connection.
type frame struct {
	body []byte
}

// request is one decoded request, handed to its handler.
type request struct {
	ctx      context.Context
	cc       *conn
	clientID string
	corr     int32
	key      int16
	version  int16
	kreq     kmsg.Request
	// unsupported is set on an ApiVersions of a version not served,
	// decoded as v0 and answered with UNSUPPORTED_VERSION.
	unsupported bool
}

func (cc *conn) run() {
	defer cc.s.wg.Done()
	defer func() {
		cc.cancel()
		cc.nc.Close()
		cc.s.mu.Lock()
		delete(cc.s.conns, cc)
		cc.s.mu.Unlock()
	}()
	// The reader reads one frame ahead, so that a client that goes away
	// while its request is handled cancels the handler's context.
	frames := make(chan frame, 1)
	cc.s.wg.Add(1) // while run's own count is held: Close's Wait covers it
	go func() {
		defer cc.s.wg.Done()
		defer close(frames)
		defer cc.cancel()
		br := bufio.NewReaderSize(cc.nc, 64<<10)
		for {
			f, err := cc.readFrame(br)
			if err != nil {
				if !errors.Is(err, io.EOF) && cc.ctx.Err() == nil {
					cc.s.log.Info("kafka: connection closed", "remote", cc.nc.RemoteAddr().String(), "err", err)
				}
				return
			}
			select {
			case frames <- f:
			case <-cc.ctx.Done():
				return
			}
		}
	}()
	bw := bufio.NewWriterSize(cc.nc, 64<<10)
	var out []byte
	for f := range frames {
		// An answer held back for the next frame's goes out before that
		// frame is handled: its handler may wait (a Fetch's max wait, a
		// Produce waiting for room, a JoinGroup), and the client waits
		// for the answer before it.
		if bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
		r, err := cc.decode(f.body)
		if err != nil {
			cc.s.log.Info("kafka: bad request, closing the connection", "remote", cc.nc.RemoteAddr().String(), "err", err)
			return
		}
		resp, err := cc.s.dispatch(r)
		if err != nil {
			if cc.ctx.Err() == nil {
				cc.s.log.Info("kafka: request refused, closing the connection", "remote", cc.nc.RemoteAddr().String(), "api", r.key, "version", r.version, "err", err)
			}
			return
		}
		if resp == nil { // Produce with acks 0: no answer
			continue
		}
		out = appendResponse(out[:0], r.corr, resp)
		if _, err := bw.Write(out); err != nil {
			return
		}
		if len(frames) == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
	bw.Flush() //nolint:errcheck // the connection is going away
}

// readFrame reads one length-prefixed request. A prefix above the
// Server's limit, or below a request header's 8 bytes, is an error before
// anything is allocated.
func (cc *conn) readFrame(br *bufio.Reader) (frame, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return frame{}, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > cc.s.maxRequestBytes {
		return frame{}, fmt.Errorf("request length %d outside 8..%d bytes", n, cc.s.maxRequestBytes)
	}
	// Grow the body with what arrives, from 1 MiB at most, so that a
	// prefix the client never fills costs about what it sent, not what it
	// claimed.
	body := make([]byte, 0, min(int(n), 1<<20))
	for len(body) < int(n) {
		if len(body) == cap(body) {
			grown := make([]byte, len(body), min(int(n), 2*cap(body)))
			copy(grown, body)
			body = grown
		}
		k, err := io.ReadAtLeast(br, body[len(body):cap(body)], 1)
		body = body[:len(body)+k]
		if err != nil && len(body) < int(n) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return frame{}, fmt.Errorf("request of %d bytes cut short after %d: %w", n, len(body), err)
		}
	}
	return frame{body: body}, nil
}

// decode parses a request header (v1, or v2 with tagged fields for a
// flexible version) and the request body. An unknown API key, a version
// outside what the Server serves (except ApiVersions, answered with
// UNSUPPORTED_VERSION as Kafka does) or a body that does not parse is an
// error: the connection closes, as Kafka closes it.
func (cc *conn) decode(b []byte) (*request, error) {
	r := &request{ctx: cc.ctx, cc: cc}
	r.key = int16(binary.BigEndian.Uint16(b[0:]))
	r.version = int16(binary.BigEndian.Uint16(b[2:]))
	r.corr = int32(binary.BigEndian.Uint32(b[4:]))
	b = b[8:]
	if len(b) < 2 {
		return nil, errors.New("request header cut short (client id)")
	}
	if n := int16(binary.BigEndian.Uint16(b)); n >= 0 {
		if len(b) < 2+int(n) {
			return nil, errors.New("request header cut short (client id)")
		}
		r.clientID = string(b[2 : 2+n])
		b = b[2+n:]
	} else if n == -1 {
		b = b[2:]
	} else {
		return nil, fmt.Errorf("client id length %d", n)
	}
	a, ok := apiByKey(r.key)
	if !ok {
		return nil, fmt.Errorf("unknown API key %d", r.key)
	}
	kreq := kmsg.RequestForKey(r.key)
	if r.version < a.min || r.version > a.max {
		if r.key == apiVersionsKey {
			// Kafka answers an ApiVersions of a version it does not
			// know with a v0 UNSUPPORTED_VERSION response and its list.
			r.version, r.unsupported = 0, true
			r.kreq = kreq
			kreq.SetVersion(0)
			return r, nil
		}
		return nil, fmt.Errorf("%s version %d outside %d..%d", a.name, r.version, a.min, a.max)
	}
	kreq.SetVersion(r.version)
	if kreq.IsFlexible() {
		rest, err := skipTags(b)
		if err != nil {
			return nil, fmt.Errorf("request header tags: %w", err)
		}
		b = rest
	}
	if err := kreq.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("%s v%d: %w", a.name, r.version, err)
	}
	r.kreq = kreq
	return r, nil
}

// skipTags skips a tagged-fields section: an unsigned varint count, then
// per field an unsigned varint tag, an unsigned varint size and the bytes.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[k:]
	for ; n > 0; n-- {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// appendResponse appends a whole response frame: length, correlation id,
// the v1 header's empty tags for a flexible response (ApiVersions keeps
// header v0, as Kafka), the body.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// advertisedHostPort is the broker address given to clients on cc.
func (cc *conn) advertisedHostPort() (string, int32) {
	addr := cc.s.advertised
	if addr == "" {
		addr = cc.local
	}
	host, port, err := splitHostPort(addr)
	if err != nil {
		return "127.0.0.1", 9092
	}
	return host, port
}

func splitHostPort(addr string) (string, int32, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %v", ps, err)
	}
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return host, int32(port), nil
}
