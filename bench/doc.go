// Package bench measures Tributary's engine against baselines under one
// harness, so that every comparison is made in the same run on the same
// machine.
//
// A Subject is anything the scenarios can drive: the core API of
// docs/contract.md (rules 1–14) with Poll replaced by PollInto, which appends to a caller's
// buffer. Five subject kinds exist (Kinds):
//
//   - "engine": engine.Broker, polling with AppendPoll into a reused buffer,
//     the allocation-free consumer path;
//   - "engine-poll": engine.Broker, polling with Poll, which returns a new
//     slice per non-empty poll (shows what AppendPoll saves);
//   - "naive": the sequential reference model (package model) behind one
//     global sync.Mutex, the simplest correct concurrent broker;
//   - "chan": Go buffered channels doing the equivalent hand-off, one
//     channel per (group, partition): a publish is a send to each group's
//     channel, a poll a receive, an ack does nothing. It has no retention,
//     no redelivery and no ownership changes in flight, so it runs only the
//     scenarios where those do not matter;
//   - "chan-raw": no broker at all: in RoundTrip and Batch64, one bare
//     buffered-channel send and receive per record in one goroutine, the
//     cost the single-goroutine performance targets are stated against, measured
//     beside the engine.
//
// Scenarios are listed by Scenarios. A Scenario is one workload, written once against Subject, with the
// subjects it is meaningful for. Scenarios report, besides ns/op and
// allocs/op, three metrics in their own unit (a published record, a
// delivery, a rebalance or a broker call): units per op, ns per unit and
// units per second ("records/op", "ns/record", "records/s"). The Benchmark functions in this package's tests run them with
// go test -bench; cmd/brokerbench runs the same Scenario values with
// testing.Benchmark over several GOMAXPROCS values and prints the ratios.
//
// Two subpackages measure by CPU time rather than wall time:
// bench/cputime runs a family of loops in short interleaved chunks, each
// timed by the process's CPU time, and pairs them round by round; bench/typed
// holds the families that compare the typed library with the engine and
// with channels. cmd/brokerbench -cputime runs them.
package bench
