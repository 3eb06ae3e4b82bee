package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/f91dcac0/tributary/engine"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// serverReadyTimeout bounds how long StartServer and StartCluster wait for a
// node to accept connections, and StartCluster for a JetStream meta leader.
const serverReadyTimeout = 10 * time.Second

// Server is an embedded single-node NATS server with JetStream, for tests,
// demos and single-process deployments. Pass it as Config.Server to connect
// in-process (no socket), or give its ClientURL to other processes. Its
// methods are safe for concurrent use.
type Server struct {
	dir string
	// mu guards s and port: the running server, replaced by Restart.
	mu   sync.Mutex
	s    *server.Server
	port int
}

// StartServer starts a single-node NATS server with JetStream on a random
// loopback port, its file store under dir (created if absent; the caller
// owns and removes it). It returns once the server accepts connections, or
// an error wrapping ErrUnavailable after 10 s.
func StartServer(dir string) (*Server, error) {
	s := &Server{dir: dir, port: server.RANDOM_PORT}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	opts := &server.Options{
		ServerName: "tributary-single",
		Host:       "127.0.0.1",
		Port:       s.port,
		JetStream:  true,
		StoreDir:   s.dir,
		NoLog:      true,
		NoSigs:     true,
	}
	ns, err := startNode(opts)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.s = ns
	s.port = ns.Addr().(*net.TCPAddr).Port
	s.mu.Unlock()
	return nil
}

// startNode creates and starts a server and waits for it to accept
// connections.
func startNode(opts *server.Options) (*server.Server, error) {
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: nats server: %v", ErrUnavailable, err)
	}
	ns.Start()
	if !ns.ReadyForConnections(serverReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("%w: nats server not ready after %v", ErrUnavailable, serverReadyTimeout)
	}
	return ns, nil
}

// ClientURL returns the server's nats:// URL on the loopback interface; it
// stays the same across Restart.
func (s *Server) ClientURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("nats://127.0.0.1:%d", s.port)
}

// InProcessConn returns an in-process connection to the server running
// now; it lets Open connect without a socket and reconnect after Restart.
// It implements nats.InProcessConnProvider.
func (s *Server) InProcessConn() (net.Conn, error) {
	s.mu.Lock()
	ns := s.s
	s.mu.Unlock()
	if ns == nil {
		return nil, errors.New("tributary/jetstream: server is shut down")
	}
	return ns.InProcessConn()
}

// Shutdown stops the server and waits for it to stop. Its store stays in
// dir. Calling it twice is a no-op.
func (s *Server) Shutdown() {
	s.mu.Lock()
	ns := s.s
	s.s = nil
	s.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// Restart stops the server (if running) and starts it again on the same
// port and store, as a crash and restart would: file-stored streams survive,
// memory-stored ones do not. Connected clients reconnect on their own.
func (s *Server) Restart() error {
	s.Shutdown()
	return s.start()
}

// Cluster is an embedded cluster of NATS servers with clustered JetStream,
// all on loopback, for tests of replicated (Replicas 3) backends. Its
// methods are safe for concurrent use.
type Cluster struct {
	// mu guards nodes: nil for a stopped node.
	mu    sync.Mutex
	nodes []*server.Server
	opts  []*server.Options
}

// StartCluster starts n (1..7) clustered nodes with JetStream, node i's
// store under dir/node<i>, connected by routes, and waits until they have
// elected a JetStream meta leader and it can place a stream on min(n, 5)
// peers (each wait: error wrapping ErrUnavailable after 10 s), so that an
// Open right after it does not meet API error 10005 "no suitable peers for
// placement". The caller owns dir.
func StartCluster(n int, dir string) (*Cluster, error) {
	if n < 1 || n > 7 {
		return nil, fmt.Errorf("%w: cluster size %d outside 1..7", engine.ErrInvalidArgument, n)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	routes := make([]*url.URL, n)
	for i := range n {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", ports[n+i])}
	}
	c := &Cluster{nodes: make([]*server.Server, n), opts: make([]*server.Options, n)}
	for i := range n {
		c.opts[i] = &server.Options{
			ServerName: fmt.Sprintf("tributary-n%d", i),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("node%d", i)),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "tributary", Host: "127.0.0.1", Port: ports[n+i]},
			Routes:     routes,
		}
	}
	for i := range n {
		ns, err := startNode(cloneOpts(c.opts[i]))
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		c.mu.Lock()
		c.nodes[i] = ns
		c.mu.Unlock()
	}
	if err := c.waitLeader(); err != nil {
		c.Shutdown()
		return nil, err
	}
	if err := c.waitPlacement(n); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// waitPlacement waits until the meta leader can place a stream on
// min(n, 5) peers: a meta leader elected before every peer has reported
// in answers API error 10005 "no suitable peers for placement". It creates
// a memory probe stream with that many replicas until that succeeds, then
// deletes it (error wrapping ErrUnavailable after 10 s).
func (c *Cluster) waitPlacement(n int) error {
	deadline := time.Now().Add(serverReadyTimeout)
	nc, err := nats.Connect(strings.Join(c.URLs(), ","), nats.Timeout(serverReadyTimeout), nats.NoCallbacksAfterClientClose())
	if err != nil {
		return fmt.Errorf("%w: probing cluster: %v", ErrUnavailable, err)
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		return fmt.Errorf("%w: probing cluster: %v", ErrUnavailable, err)
	}
	cfg := njs.StreamConfig{
		Name:     "TRIBUTARY_PLACEMENT_PROBE",
		Subjects: []string{"_tributary.placement.probe"},
		Storage:  njs.MemoryStorage,
		Replicas: min(n, 5),
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = js.CreateOrUpdateStream(ctx, cfg)
		if err == nil {
			err = js.DeleteStream(ctx, cfg.Name)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: cluster cannot place a stream on %d peers after %v: %v", ErrUnavailable, cfg.Replicas, serverReadyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cloneOpts copies o: a server keeps and changes the Options it was given.
func cloneOpts(o *server.Options) *server.Options {
	c := *o
	c.Routes = append([]*url.URL(nil), o.Routes...)
	return &c
}

// freePorts returns n distinct free loopback TCP ports.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitLeader waits until some running node is the JetStream meta leader and
// every running node knows the whole cluster.
func (c *Cluster) waitLeader() error {
	deadline := time.Now().Add(serverReadyTimeout)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		nodes := append([]*server.Server(nil), c.nodes...)
		c.mu.Unlock()
		leader := false
		for _, ns := range nodes {
			if ns != nil && ns.JetStreamIsLeader() {
				leader = true
			}
		}
		if leader {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("%w: no JetStream meta leader after %v", ErrUnavailable, serverReadyTimeout)
}

// URLs returns the client URLs of all nodes (stopped ones included: a
// client tries them in turn), to put in Config.URL joined by commas.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return urls
}

// Node returns node i (0..n-1), nil while it is stopped.
func (c *Cluster) Node(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// StopNode shuts node i down and waits; its store stays. Stopping a stopped
// node is a no-op.
func (c *Cluster) StopNode(i int) {
	c.mu.Lock()
	ns := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

// RestartNode stops node i if it runs and starts it again with the same
// ports and store, then waits for a meta leader.
func (c *Cluster) RestartNode(i int) error {
	c.StopNode(i)
	ns, err := startNode(cloneOpts(c.opts[i]))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i] = ns
	c.mu.Unlock()
	return c.waitLeader()
}

// Shutdown stops every node and waits. Calling it twice is a no-op.
func (c *Cluster) Shutdown() {
	for i := range c.nodes {
		c.StopNode(i)
	}
}
