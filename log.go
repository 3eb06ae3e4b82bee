package tributary

import (
	"context"
	"log/slog"
	"time"
)

// LogHooks returns Hooks that log the cluster's events to l, for
// Cluster.AddHooks; a nil l gives Hooks that log nothing (the library is
// silent by default). Levels, as a service owner reads them:
//
//   - Info: partitions assigned and revoked (a rebalance, per consumer),
//     a backend outage's end;
//   - Warn: a member's session expired (SPEC rule 24), a dead letter, a
//     backend outage's start (ErrUnavailable);
//   - Debug, per record: send, wait for room, delivery, ack, retry.
//
// Every record carries topic and, where it has them, group, member,
// partition and offset as attributes. The per-record records cost
// nothing when l's handler does not enable Debug (checked once per event
// with Enabled).
func LogHooks(l *slog.Logger) Hooks {
	if l == nil {
		return Hooks{}
	}
	bg := context.Background()
	debug := func() bool { return l.Enabled(bg, slog.LevelDebug) }
	recordAttrs := func(d Delivery) []any {
		return []any{"topic", d.Topic, "group", d.Group, "member", d.Member,
			"partition", d.Partition, "offset", d.Offset, "attempt", d.Attempt}
	}
	return Hooks{
		OnSend: func(ctx context.Context, s *SendInfo) func(int64, error) {
			if !debug() {
				return nil
			}
			return func(off int64, err error) {
				if err != nil {
					l.DebugContext(ctx, "tributary: send failed", "producer", s.Producer, "topic", s.Topic, "partition", s.Partition, "error", err)
					return
				}
				l.DebugContext(ctx, "tributary: sent", "producer", s.Producer, "topic", s.Topic, "partition", s.Partition, "offset", off, "bytes", s.Bytes)
			}
		},
		OnWaitForRoom: func(topic string, partition int32) {
			l.Debug("tributary: partition full, waiting for room", "topic", topic, "partition", partition)
		},
		OnDeliver: func(d Delivery) {
			if debug() {
				l.Debug("tributary: delivered", recordAttrs(d)...)
			}
		},
		OnAck: func(d Delivery) {
			if debug() {
				l.Debug("tributary: acked", recordAttrs(d)...)
			}
		},
		OnRetry: func(d Delivery, backoff time.Duration) {
			if debug() {
				l.Debug("tributary: retry", append(recordAttrs(d), "backoff", backoff)...)
			}
		},
		OnDeadLetter: func(d Delivery, topic string, cause error) {
			l.Warn("tributary: dead letter", append(recordAttrs(d), "dead_letter_topic", topic, "error", cause)...)
		},
		OnAssigned: func(r Rebalance) {
			l.Info("tributary: partitions assigned", "topic", r.Topic, "group", r.Group, "member", r.Member, "partitions", r.Partitions)
		},
		OnRevoked: func(r Rebalance) {
			l.Info("tributary: partitions revoked", "topic", r.Topic, "group", r.Group, "member", r.Member, "partitions", r.Partitions)
		},
		OnExpired: func(m MemberRef) {
			l.Warn("tributary: session expired, joining again", "topic", m.Topic, "group", m.Group, "member", m.Member)
		},
		OnOutage: func(o Outage) {
			if o.Ended {
				l.Info("tributary: backend available again", "topic", o.Topic, "group", o.Group, "member", o.Member, "outage", o.Duration)
				return
			}
			l.Warn("tributary: backend unavailable", "topic", o.Topic, "group", o.Group, "member", o.Member, "error", o.Err)
		},
	}
}
