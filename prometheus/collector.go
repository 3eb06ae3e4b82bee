package tribprom

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/f91dcac0/tributary/engine"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is what a Collector reads: the topic names and one snapshot per
// topic. *tributary.Cluster and every tributary.Backend (the in-process
// engine's, the JetStream backend) satisfy it.
//
// Topics returns the topic names; the Collector only reads the slice.
// Describe returns one snapshot of topic (SPEC rule 23: one atomic instant
// on the engine, weakened on JetStream); any error is reported by the
// Collector as a failed topic, never as a failed scrape.
// Both may be called from several scrapes at once.
type Source interface {
	Topics() []string
	Describe(topic string) (engine.TopicDescription, error)
}

// Collector is a prometheus.Collector exporting a Source's offsets and
// consumer-group lag (the metrics of the package doc). It is a checked
// collector: Describe sends every descriptor it may emit. Safe for
// concurrent use; Collect may run for several scrapes at once.
type Collector struct {
	src  Source
	err  error // non-nil: the collector is unusable (a nil Source, an invalid option); Describe reports it
	keep func(topic string) bool
	log  logger

	// describeErrors counts failed Describe calls over the collector's
	// life; an atomic, as scrapes may run concurrently.
	describeErrors atomic.Uint64

	topicUp         *prometheus.Desc
	topicPartitions *prometheus.Desc

	logStart *prometheus.Desc
	logEnd   *prometheus.Desc
	retained *prometheus.Desc

	groupMembers *prometheus.Desc
	groupLag     *prometheus.Desc

	committed *prometheus.Desc
	lag       *prometheus.Desc
	inFlight  *prometheus.Desc
	attempts  *prometheus.Desc
	owner     *prometheus.Desc

	errorsTotal *prometheus.Desc
}

var (
	topicLabels          = []string{"topic"}
	partitionLabels      = []string{"topic", "partition"}
	groupLabels          = []string{"topic", "group"}
	groupPartitionLabels = []string{"topic", "group", "partition"}
	ownerLabels          = []string{"topic", "group", "partition", "member"}
)

// NewCollector returns a Collector of src, configured by opts (namespace
// "tributary", no constant labels, every topic, no logging by default).
// It reads nothing until the first Collect. A nil src, or a namespace or
// constant label name the options make invalid, is reported by the
// registry: Register returns the error, wrapping engine.ErrInvalidArgument,
// and registers nothing.
func NewCollector(src Source, opts ...Option) *Collector {
	cfg := config{namespace: DefaultNamespace}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	desc := func(subsystem, name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(cfg.namespace, subsystem, name), help, labels, cfg.constLabels)
	}
	err := cfg.validate()
	if src == nil {
		err = fmt.Errorf("%w: tribprom: nil Source", engine.ErrInvalidArgument)
	}
	return &Collector{
		src:  src,
		err:  err,
		keep: cfg.keep,
		log:  logger{cfg.logger},

		topicUp: desc("topic", "up",
			"1 when the last scrape read the topic's snapshot (Describe succeeded), 0 when Describe failed.", topicLabels),
		topicPartitions: desc("topic", "partitions",
			"Number of partitions of the topic.", topicLabels),

		logStart: desc("partition", "log_start_offset",
			"Offset of the partition's oldest retained record; the log end offset when it retains none.", partitionLabels),
		logEnd: desc("partition", "log_end_offset",
			"Offset the partition's next successful publish gets.", partitionLabels),
		retained: desc("partition", "retained_records",
			"Records the partition retains (log end offset minus log start offset): those not yet acknowledged by every group, and a replay window's.", partitionLabels),

		groupMembers: desc("group", "members",
			"Number of members of the consumer group.", groupLabels),
		groupLag: desc("group", "lag",
			"Records of the topic the consumer group has not committed: the sum of its partition lags.", groupLabels),

		committed: desc("group_partition", "committed_offset",
			"The next offset the consumer group will be given on the partition.", groupPartitionLabels),
		lag: desc("group_partition", "lag",
			"Records of the partition the consumer group has not committed (log end offset minus committed offset).", groupPartitionLabels),
		inFlight: desc("group_partition", "in_flight",
			"1 when the record at the group's committed offset is delivered and awaits its ack, else 0.", groupPartitionLabels),
		attempts: desc("group_partition", "delivery_attempts",
			"Deliveries so far of the record at the group's committed offset (0: not yet delivered).", groupPartitionLabels),
		owner: desc("group_partition", "owner_info",
			"The member owning the partition in the consumer group; always 1. Absent when the group has no members.", ownerLabels),

		errorsTotal: desc("", "describe_errors_total",
			"Describe calls of a topic that failed, over the collector's life.", nil),
	}
}

// validate checks the names the options give against Prometheus's classic
// character set, whichever name validation the client library is set to,
// so that every exported name is one any Prometheus server and query
// accepts unquoted.
func (cfg *config) validate() error {
	if cfg.namespace != "" && !classicName(cfg.namespace) {
		return fmt.Errorf("%w: tribprom: namespace %q: want [a-zA-Z_][a-zA-Z0-9_]*", engine.ErrInvalidArgument, cfg.namespace)
	}
	for name := range cfg.constLabels {
		if !classicName(name) || strings.HasPrefix(name, "__") {
			return fmt.Errorf("%w: tribprom: const label %q: want [a-zA-Z_][a-zA-Z0-9_]*, not starting with __", engine.ErrInvalidArgument, name)
		}
	}
	return nil
}

// classicName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]*.
func classicName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// Describe sends every descriptor Collect may use (prometheus.Collector).
// A collector made with a nil Source sends one invalid descriptor instead,
// which makes Register fail.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.err != nil {
		ch <- prometheus.NewInvalidDesc(c.err)
		return
	}
	for _, d := range []*prometheus.Desc{
		c.topicUp, c.topicPartitions,
		c.logStart, c.logEnd, c.retained,
		c.groupMembers, c.groupLag,
		c.committed, c.lag, c.inFlight, c.attempts, c.owner,
		c.errorsTotal,
	} {
		ch <- d
	}
}

// Collect reads one snapshot of each kept topic of the source and sends its
// metrics (prometheus.Collector). A topic whose Describe fails gets
// topic_up 0 and no other series; the failure is counted and logged, and
// the other topics are collected as usual.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil {
		return
	}
	for _, topic := range c.src.Topics() {
		if c.keep != nil && !c.keep(topic) {
			continue
		}
		d, err := c.src.Describe(topic)
		if err != nil {
			c.describeErrors.Add(1)
			c.log.describeFailed(topic, err)
			gauge(ch, c.topicUp, 0, topic)
			continue
		}
		gauge(ch, c.topicUp, 1, topic)
		c.collectTopic(ch, topic, d)
	}
	metric(ch, c.errorsTotal, prometheus.CounterValue, float64(c.describeErrors.Load()))
}

// collectTopic sends the metrics of one snapshot, d, of topic.
func (c *Collector) collectTopic(ch chan<- prometheus.Metric, topic string, d engine.TopicDescription) {
	gauge(ch, c.topicPartitions, float64(len(d.Partitions)), topic)
	for _, p := range d.Partitions {
		part := strconv.FormatInt(int64(p.Partition), 10)
		gauge(ch, c.logStart, float64(p.LogStartOffset), topic, part)
		gauge(ch, c.logEnd, float64(p.LogEndOffset), topic, part)
		gauge(ch, c.retained, float64(p.LogEndOffset-p.LogStartOffset), topic, part)
	}
	for _, g := range d.Groups {
		gauge(ch, c.groupMembers, float64(len(g.Members)), topic, g.Group)
		var sum int64
		for _, gp := range g.Partitions {
			sum += gp.Lag
			part := strconv.FormatInt(int64(gp.Partition), 10)
			gauge(ch, c.committed, float64(gp.Committed), topic, g.Group, part)
			gauge(ch, c.lag, float64(gp.Lag), topic, g.Group, part)
			gauge(ch, c.inFlight, boolValue(gp.InFlight), topic, g.Group, part)
			gauge(ch, c.attempts, float64(gp.Attempts), topic, g.Group, part)
			if gp.Owner != "" {
				gauge(ch, c.owner, 1, topic, g.Group, part, gp.Owner)
			}
		}
		gauge(ch, c.groupLag, float64(sum), topic, g.Group)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	metric(ch, d, prometheus.GaugeValue, v, labels...)
}

// metric sends one const metric; label values the client refuses (not
// UTF-8: never for Tributary's identifiers) become an invalid metric, which
// the registry reports as a gather error instead of a panic here.
func metric(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
