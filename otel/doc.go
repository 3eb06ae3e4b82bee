// Package tribotel records OpenTelemetry metrics and traces of a
// tributary.Cluster through the library's Hooks: the semantic conventions'
// messaging instruments and spans, with messaging.system "tributary", plus
// gauges of each group's lag, in-flight records and each partition's
// retained records read from Cluster.Describe.
//
//	inst := tribotel.New() // the global MeterProvider, TracerProvider and propagator
//	reg, err := inst.Instrument(c)   // c.AddHooks(inst.Hooks()) and the gauges' callback
//	defer reg.Unregister()
//	p.Send(ctx, orders, m)           // span "send orders", traceparent in m's headers
//	cons.Run(ctx, func(ctx context.Context, m tributary.Message[Order]) error {
//		// trace.SpanFromContext(ctx) is the span "process orders",
//		// linked to the producer's "send orders"
//		return nil
//	})
//
// # Traces
//
// Producer.Send and TrySend start a span of kind Producer named
// "send <topic>" as a child of Send's context, inject its context with the
// propagator into the record's headers (W3C traceparent and tracestate,
// and baggage, with the default propagator) and end it when the publish
// ended, with the record's offset, or the error and status Error.
//
// Consumer.Run starts, around each handler call, a span of kind Consumer
// named "process <topic>" and gives the handler one context: Run's,
// carrying that span and the baggage extracted from the record's headers.
// The span's parent is the span of Run's context, if any (a new root
// otherwise), and it links to the producer's span context found in the
// headers: the semantic conventions' "process" span links to the message's
// creation context, which is in another trace (a record may be processed
// long after, and many times). WithProducerParent makes the producer's span
// the parent instead, so that one trace holds both sides. The span ends
// when the handler returned; an error (a recovered panic's included) sets
// status Error.
//
// # Metrics
//
// The instruments, their units and attributes are listed in
// docs/observability-otel.md. Counters and histograms are recorded by the
// hooks as events happen; the gauges are read at each collection from
// Describe of every topic of each cluster given to Instrument or Observe.
//
// # Cost
//
// The hooks run synchronously on the producer's and consumer's goroutines
// (tributary.Hooks): each event records its measurements with a few
// allocations for the attributes, and each span costs what the SDK's
// span processor costs. With the API's no-op providers the calls return at
// once.
package tribotel
