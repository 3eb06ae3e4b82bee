package tribotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/f91dcac0/tributary"
)

// Hooks returns the hooks that record i's metrics and spans, for
// Cluster.AddHooks; Instrument adds them and the gauges together. Every
// call returns hooks on the same instruments.
func (i *Instrumentation) Hooks() tributary.Hooks {
	return tributary.Hooks{
		OnSend:        i.onSend,
		OnWaitForRoom: i.onWaitForRoom,
		OnDeliver:     i.onDeliver,
		OnProcess:     i.onProcess,
		OnAck:         i.onAck,
		OnRetry:       i.onRetry,
		OnDeadLetter:  i.onDeadLetter,
		OnAssigned:    i.onAssigned,
		OnRevoked:     i.onRevoked,
		OnExpired:     i.onExpired,
		OnOutage:      i.onOutage,
	}
}

// onSend starts the producer span, injects its context into s.Headers and
// returns the done that ends it and records the send's count and duration.
func (i *Instrumentation) onSend(ctx context.Context, s *tributary.SendInfo) func(int64, error) {
	start := time.Now()
	attrs := operation(destination(s.Topic, s.Partition), "send", semconv.MessagingOperationTypeSend)
	spanAttrs := append(attrs[:len(attrs):len(attrs)],
		semconv.MessagingClientID(s.Producer),
		semconv.MessagingMessageBodySize(s.Bytes))
	if s.Key != "" {
		spanAttrs = append(spanAttrs, AttrMessageKey.String(s.Key))
	}
	ctx, span := i.tracer.Start(ctx, "send "+s.Topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(start),
		trace.WithAttributes(spanAttrs...))
	if i.hasField(s.Headers) {
		// A message forwarded with another record's trace context: the
		// send's replaces it whole when there is one, so that no field of
		// the other stays beside it (TraceContext writes a tracestate only
		// when not empty: the other trace's would pair with this
		// traceparent). Not in place: s.Headers shares its array with the
		// caller's Message.Headers.
		var fresh HeaderCarrier
		i.prop.Inject(ctx, &fresh)
		if len(fresh) > 0 {
			s.Headers = append(slices.DeleteFunc(slices.Clone(s.Headers), func(h tributary.Header) bool {
				return slices.Contains(i.fields, h.Key)
			}), fresh...)
		}
	} else {
		i.prop.Inject(ctx, (*HeaderCarrier)(&s.Headers))
	}
	partition := s.Partition
	return func(offset int64, err error) {
		if err != nil {
			attrs = failSpan(span, attrs, err)
		} else {
			span.SetAttributes(
				semconv.MessagingMessageID(messageID(partition, offset)),
				AttrOffset.Int64(offset))
		}
		opt := metric.WithAttributes(attrs...)
		i.sent.Add(context.Background(), 1, opt)
		i.opDuration.Record(context.Background(), time.Since(start).Seconds(), opt)
		span.End()
	}
}

// hasField reports whether headers hold a key the propagator injects.
func (i *Instrumentation) hasField(headers []tributary.Header) bool {
	for _, h := range headers {
		if slices.Contains(i.fields, h.Key) {
			return true
		}
	}
	return false
}

// onProcess starts the process span on the handler's context, linked to
// (or, WithProducerParent, a child of) the producer's span context in
// d.Headers, and returns the context with it and the baggage found there.
func (i *Instrumentation) onProcess(ctx context.Context, d tributary.Delivery) (context.Context, func(error, time.Duration)) {
	carrier := HeaderCarrier(d.Headers)
	extracted := i.prop.Extract(context.Background(), &carrier)
	producer := trace.SpanContextFromContext(extracted)
	if b := baggage.FromContext(extracted); b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	attrs := operation(group(d.Topic, d.Group, d.Partition), "process", semconv.MessagingOperationTypeProcess)
	spanAttrs := append(attrs[:len(attrs):len(attrs)],
		semconv.MessagingClientID(d.Member),
		semconv.MessagingMessageID(d.ID),
		AttrOffset.Int64(d.Offset),
		AttrAttempt.Int(int(d.Attempt)),
		semconv.MessagingMessageBodySize(d.Bytes))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(spanAttrs...),
	}
	if producer.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: producer}))
		if i.producerParent {
			ctx = trace.ContextWithRemoteSpanContext(ctx, producer)
		}
	}
	ctx, span := i.tracer.Start(ctx, "process "+d.Topic, opts...)
	return ctx, func(err error, elapsed time.Duration) {
		if err != nil {
			attrs = failSpan(span, attrs, err)
		}
		i.processDuration.Record(context.Background(), elapsed.Seconds(), metric.WithAttributes(attrs...))
		span.End()
	}
}

func (i *Instrumentation) onDeliver(d tributary.Delivery) {
	i.consumed.Add(context.Background(), 1, metric.WithAttributes(
		operation(group(d.Topic, d.Group, d.Partition), "receive", semconv.MessagingOperationTypeReceive)...))
}

func (i *Instrumentation) onAck(d tributary.Delivery) {
	i.acks.Add(context.Background(), 1, metric.WithAttributes(
		operation(group(d.Topic, d.Group, d.Partition), "ack", semconv.MessagingOperationTypeSettle)...))
}

func (i *Instrumentation) onRetry(d tributary.Delivery, _ time.Duration) {
	i.retries.Add(context.Background(), 1, metric.WithAttributes(
		operation(group(d.Topic, d.Group, d.Partition), "retry", semconv.MessagingOperationTypeSettle)...))
}

func (i *Instrumentation) onDeadLetter(d tributary.Delivery, topic string, cause error) {
	attrs := append(group(d.Topic, d.Group, d.Partition), AttrDeadLetterTopic.String(topic))
	if cause != nil {
		attrs = append(attrs, errorType(cause))
	}
	i.deadLetters.Add(context.Background(), 1, metric.WithAttributes(attrs...))
}

func (i *Instrumentation) onWaitForRoom(topic string, partition int32) {
	i.waits.Add(context.Background(), 1, metric.WithAttributes(destination(topic, partition)...))
}

func (i *Instrumentation) onAssigned(r tributary.Rebalance) {
	i.assigned.Add(context.Background(), int64(len(r.Partitions)), metric.WithAttributes(member(r.Topic, r.Group)...))
}

func (i *Instrumentation) onRevoked(r tributary.Rebalance) {
	i.revoked.Add(context.Background(), int64(len(r.Partitions)), metric.WithAttributes(member(r.Topic, r.Group)...))
}

func (i *Instrumentation) onExpired(m tributary.MemberRef) {
	i.expiries.Add(context.Background(), 1, metric.WithAttributes(member(m.Topic, m.Group)...))
}

func (i *Instrumentation) onOutage(o tributary.Outage) {
	if o.Ended {
		return
	}
	i.outages.Add(context.Background(), 1, metric.WithAttributes(append(member(o.Topic, o.Group), errorType(o.Err))...))
}

// member is the attributes of a consumer group on a topic, with no
// partition.
func member(topic, g string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingDestinationName(topic),
		semconv.MessagingConsumerGroupName(g),
	}
}

// messageID is the library's Message.ID of a record: "<partition>-<offset>".
func messageID(partition int32, offset int64) string {
	return strconv.Itoa(int(partition)) + "-" + strconv.FormatInt(offset, 10)
}

// failSpan records err on span (the error, status Error and its
// error.type) and returns attrs with the error.type added, for the
// operation's metric.
func failSpan(span trace.Span, attrs []attribute.KeyValue, err error) []attribute.KeyValue {
	et := errorType(err)
	text, ok := errorText(err)
	if !ok {
		err = errors.New(text) // RecordError calls Error too
	}
	span.SetAttributes(et)
	span.RecordError(err)
	span.SetStatus(codes.Error, text)
	return append(attrs, et)
}

// errorText is err.Error(), and true; when that panics (a handler's typed
// nil whose Error dereferences its receiver), a fixed text naming err's
// type, as the library writes in the dead letter, and false.
func errorText(err error) (text string, ok bool) {
	defer func() {
		if recover() != nil {
			text, ok = fmt.Sprintf("%T with a panicking Error method", err), false
		}
	}()
	return err.Error(), true
}
