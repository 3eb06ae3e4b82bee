package tribotel

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/f91dcac0/tributary"
)

// ScopeName is the instrumentation scope of the meter and tracer: the
// package's import path.
const ScopeName = "github.com/f91dcac0/tributary/otel"

// System is the messaging.system attribute of every measurement and span.
const System = "tributary"

// Instrument names beyond the semantic conventions' four
// (messaging.client.sent.messages, messaging.client.consumed.messages,
// messaging.client.operation.duration, messaging.process.duration). The
// conventions keep messaging.<system>.* for a system's own attributes and
// instruments (messaging.kafka.*, messaging.rabbitmq.*), and define no lag,
// retry or dead-letter instrument, so these live under
// messaging.tributary.*.
const (
	MetricConsumerLag         = "messaging.tributary.consumer.lag"
	MetricConsumerInFlight    = "messaging.tributary.consumer.in_flight"
	MetricPartitionRetained   = "messaging.tributary.partition.retained"
	MetricConsumerAcks        = "messaging.tributary.consumer.acks"
	MetricConsumerRetries     = "messaging.tributary.consumer.retries"
	MetricConsumerDeadLetters = "messaging.tributary.consumer.dead_letters"
	MetricPartitionsAssigned  = "messaging.tributary.consumer.partitions.assigned"
	MetricPartitionsRevoked   = "messaging.tributary.consumer.partitions.revoked"
	MetricConsumerExpiries    = "messaging.tributary.consumer.expiries"
	MetricConsumerOutages     = "messaging.tributary.consumer.outages"
	MetricProducerWaits       = "messaging.tributary.producer.waits"
)

// Attributes of this package beyond the semantic conventions' (same
// namespace as the instruments above).
const (
	// AttrOffset is the record's offset in its partition (int): the
	// counterpart of messaging.kafka.offset. messaging.message.id carries
	// the library's Message.ID, "<partition>-<offset>".
	AttrOffset = attribute.Key("messaging.tributary.offset")
	// AttrAttempt is the delivery's attempt (int, 1 the first delivery:
	// Message.Attempt), on process spans.
	AttrAttempt = attribute.Key("messaging.tributary.message.attempt")
	// AttrMessageKey is the record's key, on spans, when not empty.
	AttrMessageKey = attribute.Key("messaging.tributary.message.key")
	// AttrDeadLetterTopic is the dead-letter topic, on the dead-letter
	// counter.
	AttrDeadLetterTopic = attribute.Key("messaging.tributary.dead_letter.topic")
)

// durationBuckets are the semantic conventions' advised bucket boundaries
// of messaging.client.operation.duration and messaging.process.duration,
// in seconds.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Option configures New.
type Option func(*config)

type config struct {
	mp             metric.MeterProvider
	tp             trace.TracerProvider
	prop           propagation.TextMapPropagator
	producerParent bool
}

// WithMeterProvider sets the MeterProvider; default otel.GetMeterProvider()
// at New. A nil mp keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// WithTracerProvider sets the TracerProvider; default
// otel.GetTracerProvider() at New. A nil tp keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithPropagator sets the propagator that injects the producer span's
// context into a record's headers and extracts it from a delivery's; the
// default is otel.GetTextMapPropagator() at New, or, when that is the
// API's empty default (no fields), W3C trace context and baggage, so that
// producers and consumers correlate without global set-up. A nil p keeps
// the default.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) {
		if p != nil {
			c.prop = p
		}
	}
}

// WithProducerParent makes each process span a child of the producer's
// span context found in the record's headers, in the producer's trace,
// instead of a child of the handler's context; the link to it stays. One
// trace then shows a request, its send and every processing of the record
// (franz-go's kotel default), at the price of traces that grow for as
// long as a record is redelivered or replayed. Without it (the default)
// the process span is linked only, as the semantic conventions advise.
func WithProducerParent() Option {
	return func(c *config) { c.producerParent = true }
}

// Instrumentation records metrics and traces of clusters through their
// hooks. It is safe for concurrent use; one Instrumentation may instrument
// several clusters (their measurements share instruments and attributes:
// two clusters with a topic of the same name add up).
type Instrumentation struct {
	tracer         trace.Tracer
	meter          metric.Meter
	prop           propagation.TextMapPropagator
	fields         []string // prop.Fields()
	producerParent bool

	sent, consumed, acks, retries, deadLetters metric.Int64Counter
	assigned, revoked, expiries, outages       metric.Int64Counter
	waits                                      metric.Int64Counter
	opDuration, processDuration                metric.Float64Histogram
	lag, inFlight, retained                    metric.Int64ObservableGauge

	// errs are the errors of creating the instruments (a provider's
	// refusal), reported by Observe and Instrument; an instrument that
	// failed is the API's no-op one.
	errs error
}

// New returns an Instrumentation on the providers and propagator opts set
// (the global ones otherwise). An instrument a MeterProvider refuses to
// create records nothing, and Instrument and Observe return its error.
func New(opts ...Option) *Instrumentation {
	cfg := config{}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.prop == nil {
		cfg.prop = otel.GetTextMapPropagator()
		if len(cfg.prop.Fields()) == 0 {
			cfg.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
		}
	}
	i := &Instrumentation{
		tracer:         cfg.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		meter:          cfg.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL)),
		prop:           cfg.prop,
		fields:         cfg.prop.Fields(),
		producerParent: cfg.producerParent,
	}
	m := i.meter
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		i.errs = errors.Join(i.errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		i.errs = errors.Join(i.errs, err)
		return h
	}
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit("{message}"), metric.WithDescription(desc))
		i.errs = errors.Join(i.errs, err)
		return g
	}
	i.sent = counter("messaging.client.sent.messages", "{message}", "Number of messages producer attempted to send to the broker.")
	i.consumed = counter("messaging.client.consumed.messages", "{message}", "Number of messages that were delivered to the application.")
	i.opDuration = histogram("messaging.client.operation.duration", "Duration of messaging operation initiated by a producer or consumer client.")
	i.processDuration = histogram("messaging.process.duration", "Duration of processing operation.")
	i.acks = counter(MetricConsumerAcks, "{message}", "Deliveries acknowledged by a consumer.")
	i.retries = counter(MetricConsumerRetries, "{message}", "Deliveries released for redelivery: Retry, Nack, or Run after a handler error.")
	i.deadLetters = counter(MetricConsumerDeadLetters, "{message}", "Records sent to a consumer group's dead-letter topic.")
	i.assigned = counter(MetricPartitionsAssigned, "{partition}", "Partitions a consumer found assigned to it.")
	i.revoked = counter(MetricPartitionsRevoked, "{partition}", "Partitions a consumer found revoked from it.")
	i.expiries = counter(MetricConsumerExpiries, "{expiry}", "Sessions a consumer found expired.")
	i.outages = counter(MetricConsumerOutages, "{outage}", "Outages of the backend a consumer met (counted as they begin).")
	i.waits = counter(MetricProducerWaits, "{wait}", "Sends that found their partition full and waited for room.")
	i.lag = gauge(MetricConsumerLag, "Records of a partition the consumer group has not committed: log end offset minus committed offset.")
	i.inFlight = gauge(MetricConsumerInFlight, "Records of a partition in flight to the consumer group's owner (0 or 1).")
	i.retained = gauge(MetricPartitionRetained, "Records a partition retains: log end offset minus log start offset.")
	return i
}

// Propagator returns the propagator i injects and extracts with.
func (i *Instrumentation) Propagator() propagation.TextMapPropagator { return i.prop }

// Instrument adds i's Hooks to c (c.AddHooks) and registers the gauges'
// callback over c (Observe). The hooks cannot be removed (Cluster.AddHooks);
// Unregister of the returned registration stops the gauges only. Errors:
// an instrument the MeterProvider refused to create, or its refusal of the
// callback; the hooks are added even so.
func (i *Instrumentation) Instrument(c *tributary.Cluster) (metric.Registration, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: tribotel: nil cluster", tributary.ErrInvalidArgument)
	}
	c.AddHooks(i.Hooks())
	return i.Observe(c)
}

// Observe registers a callback that, at each collection, reads Describe of
// every topic of c and observes messaging.tributary.consumer.lag and
// in_flight per topic, group and partition, and
// messaging.tributary.partition.retained per topic and partition. A topic
// that Describe refuses (deleted, the cluster closed) is skipped. Unregister
// the registration when c is closed, or it keeps c reachable. Errors: as
// Instrument.
func (i *Instrumentation) Observe(c *tributary.Cluster) (metric.Registration, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: tribotel: nil cluster", tributary.ErrInvalidArgument)
	}
	reg, err := i.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, topic := range c.Topics() {
			d, err := c.Describe(topic)
			if err != nil {
				continue
			}
			for _, p := range d.Partitions {
				o.ObserveInt64(i.retained, p.LogEndOffset-p.LogStartOffset,
					metric.WithAttributes(destination(topic, p.Partition)...))
			}
			for _, g := range d.Groups {
				for _, gp := range g.Partitions {
					opt := metric.WithAttributes(group(topic, g.Group, gp.Partition)...)
					o.ObserveInt64(i.lag, gp.Lag, opt)
					var n int64
					if gp.InFlight {
						n = 1
					}
					o.ObserveInt64(i.inFlight, n, opt)
				}
			}
		}
		return nil
	}, i.lag, i.inFlight, i.retained)
	return reg, errors.Join(i.errs, err)
}

// destination is the attributes naming a topic's partition.
func destination(topic string, partition int32) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingDestinationName(topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(partition))),
	}
}

// group is destination and the consumer group's name.
func group(topic, g string, partition int32) []attribute.KeyValue {
	return append(destination(topic, partition), semconv.MessagingConsumerGroupName(g))
}

// operation is attrs with the operation's name and type.
func operation(attrs []attribute.KeyValue, name string, typ attribute.KeyValue) []attribute.KeyValue {
	return append(attrs, semconv.MessagingOperationName(name), typ)
}

// errorType is the error.type of err: a short name for the library's
// sentinels and the context's errors, the semantic conventions' type name
// of err otherwise.
func errorType(err error) attribute.KeyValue {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return semconv.ErrorTypeKey.String(s.name)
		}
	}
	return semconv.ErrorType(err)
}

var sentinels = []struct {
	err  error
	name string
}{
	{tributary.ErrFenced, "fenced"}, // before ErrClosed, which it wraps too
	{tributary.ErrClosed, "closed"},
	{tributary.ErrUnavailable, "unavailable"},
	{tributary.ErrPartitionFull, "partition_full"},
	{tributary.ErrEncode, "encode"},
	{tributary.ErrDecode, "decode"},
	{tributary.ErrPartitioner, "partitioner"},
	{tributary.ErrInvalidArgument, "invalid_argument"},
	{tributary.ErrUnknownTopic, "unknown_topic"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}
