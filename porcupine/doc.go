// Package porcupine checks recorded concurrent histories of the Tributary
// engine for linearizability (SPEC rule 14) against the sequential
// reference model, package model, using the porcupine checker
// (github.com/anishathalye/porcupine).
//
// The pieces, in the order a check uses them:
//
//   - Workload and Run: a seeded workload generator. Run starts Clients
//     goroutines per topic on one *engine.Broker, each issuing OpsPerClient
//     core calls drawn from a named Mix, and returns the recorded History.
//   - Recorder and Client: wrap an *engine.Broker and record each call's
//     Input, Output, client id, and call and return timestamps.
//   - Model: the porcupine model. Its state is a *model.Broker; Step clones
//     it and never mutates its input. Histories are partitioned by topic.
//   - Check, Visualize: check a History (all topics in parallel, with a
//     timeout), name the failing topic, and draw it as porcupine's HTML
//     visualization.
//   - Fixture: a History with its expected verdict, stored as JSON under
//     testdata/ and replayed by the tests.
//
// # Clock
//
// Timestamps are nanoseconds since the Recorder was made, read from Go's
// monotonic clock (time.Since on a time.Now with a monotonic reading, that
// is CLOCK_MONOTONIC, one system-wide clock that never goes backwards, on
// every thread). A Client reads it immediately before calling the engine and
// immediately after the call returns, so the recorded interval
// [Call, Return] contains the call's real interval, and with it its
// linearization point. If call A returned before call B began in real time,
// A's return reading precedes B's call reading, so Return(A) <= Call(B):
// the recorded order never inverts the real order. Equal readings can only
// make the checker treat two calls as concurrent (porcupine's intervals are
// closed), which can hide a violation but never invent one. A shared atomic
// counter would give the same guarantee, but every client would then
// synchronise through it on every call, which the race detector reads as a
// happens-before edge between all clients: it would hide data races in the
// engine from `go test -race`. The clock adds no such edge.
//
// # Partitioning by topic
//
// Every core call names exactly one topic, and what it returns and changes
// depends only on that topic's state and the broker's capacity, which never
// changes: groups, members, partition logs and retention all live inside one
// topic, and Create of one topic does not look at another. The broker's state
// is therefore the product of independent per-topic states, and by the
// locality of linearizability (Herlihy and Wing, 1990, theorem 1) a history
// is linearizable if and only if each per-topic subhistory is. The model's
// Init is an empty *model.Broker of the run's capacity; a topic's subhistory
// contains that topic's Create, so while checking one topic the model state
// holds that topic only, and Equal and Hash compare that topic only. Calls
// naming an invalid or never-created topic form their own subhistory, in
// which every call must be an invalid-argument error. TestTopicsIndependent
// checks the premise against the model on random sequential histories.
//
// # What is not checked
//
// A check covers the seven core calls of SPEC section 1, on the histories
// the workloads produce; it says nothing of interleavings they never hit.
// Errors are compared by kind (ErrInvalidArgument or not), not by message.
// A nil and an empty result slice compare equal. The inspection methods
// (LogStartOffset, Committed, …) and the Tributary features of SPEC
// section 3 are not recorded. Liveness (no deadlock, no call waiting for a
// future event) is checked only in that every run finishes.
package porcupine
