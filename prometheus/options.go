package tribprom

import (
	"log/slog"
	"maps"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultNamespace is the prefix of every metric name unless WithNamespace
// sets another.
const DefaultNamespace = "tributary"

// Option configures a Collector. Every option is applied once, by
// NewCollector; a new option is added here, with a field of config.
type Option func(*config)

type config struct {
	namespace   string
	constLabels prometheus.Labels
	keep        func(topic string) bool // nil: every topic
	logger      *slog.Logger            // nil: failures are not logged
}

// WithNamespace sets the prefix of every metric name ("tributary" by
// default): WithNamespace("shop") names shop_group_lag and so on. "" leaves
// the names unprefixed (group_lag). A namespace outside
// [a-zA-Z_][a-zA-Z0-9_]* makes Register return an error.
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace = ns }
}

// WithConstLabels adds labels with fixed values to every series, for
// example {"cluster": "eu-1"} when several clusters are scraped into one
// Prometheus. The map is copied. A label named topic, partition, group or
// member, a name outside [a-zA-Z_][a-zA-Z0-9_]* or starting with __, or a
// value that is not UTF-8, makes Register return an error.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(c *config) { c.constLabels = maps.Clone(labels) }
}

// WithTopicFilter exports only the topics for which keep returns true; the
// others are not described, so they cost a scrape nothing. keep is called
// once per topic per scrape, possibly from several scrapes at once, and
// must not block. Nil keeps every topic (the default).
func WithTopicFilter(keep func(topic string) bool) Option {
	return func(c *config) { c.keep = keep }
}

// WithLogger logs each failed Describe at Warn level (message "tributary:
// describe failed", attributes topic and err). Nil, the default, logs
// nothing; the failure is still counted in describe_errors_total and shown
// by topic_up.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}
