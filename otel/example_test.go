package tribotel_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/f91dcac0/tributary"
	tribotel "github.com/f91dcac0/tributary/otel"
)

func Example() {
	spans := tracetest.NewSpanRecorder() // an exporter's span processor in a program
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	c, _ := tributary.NewCluster(1000)
	defer c.Close()
	inst := tribotel.New(tribotel.WithTracerProvider(tp)) // the global MeterProvider
	reg, _ := inst.Instrument(c)
	defer reg.Unregister()

	orders, _ := tributary.CreateTopic(c, "orders", 2, tributary.String())
	p, _ := tributary.NewProducer[string](c, "web", tributary.RoundRobin())
	p.Send(context.Background(), orders, tributary.Message[string]{Value: "order 1"})

	cons, _ := tributary.NewConsumer(orders, "billing", "b1")
	ctx, cancel := context.WithCancel(context.Background())
	cons.Run(ctx, func(ctx context.Context, m tributary.Message[string]) error {
		span := trace.SpanFromContext(ctx) // "process orders", linked to "send orders"
		fmt.Println(m.Value, span.SpanContext().IsValid())
		cancel()
		return nil
	})
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanKind())
	}
	// Output:
	// order 1 true
	// send orders producer
	// process orders consumer
}
