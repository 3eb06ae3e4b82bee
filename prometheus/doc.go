// Package tribprom exports a Tributary cluster's offsets and consumer-group
// lag to Prometheus: a prometheus.Collector of the kafka_exporter / Burrow
// kind, which reads the broker's state at scrape time and keeps none of its
// own.
//
// It lives in a module of its own (github.com/f91dcac0/tributary/prometheus)
// so that importers of Tributary's core do not inherit Prometheus's client
// library. Import it under its package name:
//
//	import tribprom "github.com/f91dcac0/tributary/prometheus"
//
//	cluster, _ := tributary.NewCluster(1000)
//	prometheus.MustRegister(tribprom.NewCollector(cluster))
//	http.Handle("/metrics", promhttp.Handler())
//
// # What a scrape reads
//
// Each Collect asks the Source for its topics, then, for each topic the
// topic filter keeps, one Describe: one snapshot of the topic (SPEC rule
// 23). On the in-process engine (tributary.NewCluster) it is one atomic
// instant, so every figure of one topic agrees with every other: a group's
// lag is the log end offset minus its committed offset, and the group lag
// is the sum of those. Two topics are read at two instants. The JetStream
// backend's Describe is weakened (docs/jetstream.md): partitions and
// groups are read one after another, and within one partition lag is still
// never negative and no committed offset is below the log start. Nothing
// is cached between scrapes; a scrape costs one Describe per topic, which
// takes the topic's locks briefly on the engine, and reads the topic's
// keys and streams on JetStream.
//
// A topic whose Describe fails is reported, not fatal: its topic_up gauge is
// 0, describe_errors_total counts the failure, the optional *slog.Logger
// logs it at Warn, and the other topics are exported as usual.
//
// # Metrics
//
// With the default namespace "tributary" (WithNamespace changes the prefix):
//
//	tributary_topic_up{topic}                                          gauge, 1 when the topic's Describe succeeded, else 0
//	tributary_topic_partitions{topic}                                  gauge, partition count
//	tributary_partition_log_start_offset{topic,partition}              gauge, offset of the oldest retained record
//	tributary_partition_log_end_offset{topic,partition}                gauge, offset the next publish gets
//	tributary_partition_retained_records{topic,partition}              gauge, log end − log start (SPEC rule 13)
//	tributary_group_members{topic,group}                               gauge, member count
//	tributary_group_lag{topic,group}                                   gauge, records, sum of the group's partition lags
//	tributary_group_partition_committed_offset{topic,group,partition}  gauge, next offset the group will be given
//	tributary_group_partition_lag{topic,group,partition}               gauge, records, log end − committed
//	tributary_group_partition_in_flight{topic,group,partition}         gauge, 1 when the record at the committed offset is in flight
//	tributary_group_partition_delivery_attempts{topic,group,partition} gauge, deliveries so far of the record at the committed offset
//	tributary_group_partition_owner_info{topic,group,partition,member} gauge, always 1: the member owning the partition
//	tributary_describe_errors_total                                    counter, failed Describe calls since the collector was made
//
// Offsets are positions in a partition's log; lags and retained records
// are numbers of records. None is a time or a size in bytes, so none takes
// a unit suffix. The figures are Describe's (SPEC rule 23): in-flight is
// rule 10's one reserved record per partition and group, attempts are
// rule 16's delivery count (reset by Ack and Seek), and the log start moves
// only when every group has committed past a record (rule 13; later with a
// replay window, rule 21).
//
// The owner is an info metric rather than a label of the other series, so
// that a rebalance ends and starts one series per partition, not four; a
// partition of a group with no members has no owner_info series.
// Cardinality is that of kafka_exporter: one series per partition for each
// log figure, one per group and partition for each group figure; join
// owner_info on (topic, group, partition) to see a member's lag.
package tribprom
