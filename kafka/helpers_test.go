package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kgo"
)

// serve starts a Server for a new cluster of the given capacity on a free
// loopback port, closed (cluster too) when the test ends.
func serve(t testing.TB, capacity int32, opts ...Option) (*tributary.Cluster, *Server) {
	t.Helper()
	return serveCluster(t, capacity, nil, opts...)
}

// serveCluster is serve with cluster options.
func serveCluster(t testing.TB, capacity int32, copts []tributary.ClusterOption, opts ...Option) (*tributary.Cluster, *Server) {
	t.Helper()
	c, err := tributary.NewCluster(capacity, copts...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(c, "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		c.Close()
	})
	return c, s
}

// client is a kgo client of s, closed when the test ends.
func client(t testing.TB, s *Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return clientAt(t, s.Addr(), opts...)
}

// clientAt is a kgo client of the broker at addr, closed when the test
// ends.
func clientAt(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testCtx is a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
