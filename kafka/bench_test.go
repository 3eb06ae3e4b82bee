package kafka

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchBroker starts a broker with topic "bench" of 4 partitions and
// returns its address: Tributary's front end, or kfake (the reference).
func benchBroker(b *testing.B, kind string) string {
	switch kind {
	case "tributary":
		c, err := tributary.NewCluster(tributary.MaxCapacity)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tributary.CreateTopic(c, "bench", 4, tributary.Bytes()); err != nil {
			b.Fatal(err)
		}
		s, err := Listen(c, "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(); c.Close() })
		return s.Addr()
	default:
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "bench"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(kc.Close)
		return kc.ListenAddrs()[0]
	}
}

// BenchmarkKgo produces b.N records of 100 bytes with a kgo producer
// (default batching, no compression) and consumes them back from the
// start with a kgo consumer, against Tributary's front end and against
// kfake in the same run; it reports produce and consume records/s (wall
// time) and the process's CPU time per record of each phase (getrusage:
// client and broker together, both in this process), the figure to pair
// between the two brokers on a loaded machine.
func BenchmarkKgo(b *testing.B) {
	value := make([]byte, 100)
	for _, kind := range []string{"tributary", "kfake"} {
		b.Run(kind, func(b *testing.B) {
			addr := benchBroker(b, kind)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchCompression(kgo.NoCompression()))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.ResetTimer()
			start, cpu := time.Now(), cpuTime()
			errs := make(chan error, 1)
			for i := 0; i < b.N; i++ {
				p.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 64)), Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			if err := p.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			produced, producedCPU := time.Since(start), cpuTime()-cpu
			c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			start, cpu = time.Now(), cpuTime()
			for n := 0; n < b.N; {
				fs := c.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					b.Fatal(err)
				}
				n += fs.NumRecords()
			}
			consumed, consumedCPU := time.Since(start), cpuTime()-cpu
			b.StopTimer()
			b.ReportMetric(float64(b.N)/produced.Seconds(), "produced/s")
			b.ReportMetric(float64(b.N)/consumed.Seconds(), "consumed/s")
			b.ReportMetric(float64(producedCPU.Nanoseconds())/float64(b.N), "cpu-ns/produced")
			b.ReportMetric(float64(consumedCPU.Nanoseconds())/float64(b.N), "cpu-ns/consumed")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
