// Package porcupine checks recorded concurrent histories of the Tributary
// engine for linearizability (SPEC rule 14) against the sequential
// reference model, package model, using the porcupine checker
// (github.com/anishathalye/porcupine).
//
// The pieces, in the order a check uses them:
//
//   - Workload and Run: a seeded workload generator. Run starts Clients
//     goroutines per topic, each issuing OpsPerClient calls drawn from a
//     named Mix (with the Mix's broker Options), and returns the recorded
//     History.
//   - Recorder and Client: wrap an *engine.Broker and record each call's
//     Input, Output, client id, and call and return timestamps; a
//     TestClock is a broker clock that a recorded Advance moves.
//   - Model: the porcupine model of a broker configured as a Config
//     (capacity, Options, history format Version). Its state is a
//     *model.Broker and the test clock's reading; Step clones the broker and
//     never mutates its input. Histories are partitioned by topic.
//   - Check, Visualize: check a History (all topics in parallel, with a
//     timeout), name the failing topic, and draw it as porcupine's HTML
//     visualization.
//   - Fixture: a History with its expected verdict, stored as JSON under
//     testdata/ and replayed by the tests.
//
// # Calls
//
// Every call of the engine is recorded and checked: the seven core calls
// (Create, Join, Leave, Publish, Poll, Ack, Retry) and PublishMessage (key
// and headers), CreateGroup and SetAssignor (an assignor named among
// RoundRobin, Range, Sticky and the test assignor Picky, which refuses
// groups of three members so that rebalances fail with
// ErrInvalidAssignment), CreateGroupAt (a group at the log end,
// StartLatest, or the log start; the latest mix makes it), DeleteGroup,
// AddPartitions, Seek and Describe (the whole description is compared,
// members' last-seen instants included), Heartbeat and Rejoin (SPEC rules
// 24–25; the session and rejoin mixes make them), and
// MemberHandle.AppendPollPartition
// (KindPollPartition, checked against model.PollPartition; the acktimeout
// and addpartitions mixes make it). A polled record is compared whole: topic,
// partition, offset, payload, key, headers, attempt and, under a test clock,
// time. Errors compare by kind (ErrKind): ErrInvalidArgument,
// ErrOffsetOutOfRange, ErrGroupNotEmpty, ErrInvalidAssignment, or other,
// which never matches.
//
// # Histories and their format
//
// A History carries its Config, so a stored history is checked against the
// broker it ran on. Config.Version is the format: version 1 (HistoryVersion,
// what Run writes) records every call above with record attempts; version 0
// (the field absent) is the format of the histories recorded before the
// Tributary features, core calls only, whose records have no attempt and
// whose failed Publish carries offset 0. A version 0 history is checked as
// it was recorded: the model's attempts, and every result beside an error,
// are left out of the comparison. Old fixtures therefore stay valid as they
// are; JSON fields added since are omitted when empty, and a version 0
// output's "invalid": true reads as ErrInvalid.
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
// # The test clock
//
// The broker clock stamps records, with an ack timeout (SPEC rule 22) ages
// deliveries and, with a session timeout (rule 24), decides which members
// have expired at each call. A workload with Options.TestClock (the
// acktimeout, session and rejoin mixes; an ack or session timeout needs
// it)
// gives the engine engine.WithClock over a TestClock, Epoch plus an atomic
// count of nanoseconds that only a recorded Advance moves; the model's state
// carries the same reading, which Step binds to the cloned model broker
// (model.SetClock), so Advance is one more linearizable operation in the
// history, and record times are compared. Without a test clock record times
// come from the wall clock: they are not recorded, and the model's clock
// reads the zero time so that its states stay comparable.
//
// Two consequences. First, the engine has one clock per broker, so a
// test-clock workload runs each topic on its own broker with its own clock:
// an Advance then belongs to one topic, as every other call does, and the
// topics stay independent (next section). Second, the engine reads its
// clock once per Publish, PublishMessage or Poll, not necessarily at the
// instant the call takes effect (SPEC rule 15 says "read during the call").
// An Advance falling between the two would make a correct engine look
// non-linearizable, so a TestClock has a gate: those calls hold it shared
// and Advance exclusively, and the clock never moves during a call that
// reads it. The gate is a read-write lock, so under -race each Advance is a
// happens-before edge between the clients of its topic; only the
// acktimeout mix pays that, in the few calls around its Advances.
//
// # Session timeouts: what a history records
//
// Under a session timeout every valid call on a topic but Create reads the
// clock and first expires, at that reading, the members last seen the
// timeout or more before it (rule 24). For that to be checkable the checker
// must know the reading each call used. Two designs would do: record, with
// each call, the clock reading it used; or record the clock's moves, Advance,
// as operations and make sure no call straddles one. A client cannot
// record the first faithfully, since the engine reads its clock inside the
// call, at an instant the client does not see (a reading taken around the
// call could differ from the engine's), and the model would still have to
// be told which reading applies where. So this package takes the second:
// Advance is an operation of the history, the model's state carries the
// clock's reading (state.now), Step binds the cloned model broker to it, and
// under a session timeout a Client holds the gate shared around every call
// but Create and Advance (not only Publish and Poll), so the clock never
// moves during one. Then the reading a call used is exactly the reading of
// the state it is applied to in a linearization, and the model expires
// members at that reading: a broker that expires too early or too late (the
// session mix's Advance moves by eighths of the timeout, so members are
// often last seen exactly the timeout before a call), expires nobody, skips
// the rebalance, or refreshes the wrong last-seen is Illegal, and
// Describe's LastSeen is compared instant by instant.
//
// # Partitioning by topic
//
// Every call names exactly one topic, and what it returns and changes
// depends only on that topic's state, the broker's capacity and options,
// which never change, and (under a test clock) that topic's clock: groups,
// members, partition logs, assignors and retention all live inside one
// topic, and Create of one topic does not look at another. The broker's
// state is therefore the product of independent per-topic states, and by
// the locality of linearizability (Herlihy and Wing, 1990, theorem 1) a
// history is linearizable if and only if each per-topic subhistory is. The
// model's Init is an empty *model.Broker of the run's configuration; a
// topic's subhistory contains that topic's Create, so while checking one
// topic the model state holds that topic only, and Equal and Hash compare
// that topic only. Calls naming an invalid or never-created topic form their
// own subhistory, in which every call must be an invalid-argument error.
// TestTopicsIndependent checks the premise against the model on random
// sequential histories of every call.
//
// # Workloads and faults
//
// Mixes lists the workload shapes: six of the core calls (balanced,
// multipoll, rebalance, ackretry, full, groups) and one per Tributary
// feature (seek, assignor, addpartitions, lifecycle, latest, window,
// extended, acktimeout, and for member liveness session and rejoin), each
// with the broker Options it needs; session has clients fall silent for
// spells (Mix.Quiet) so that their members expire while others heartbeat,
// and a client that finds itself expired joins again; rejoin has pairs of
// clients share a member id, one rejoining while the other still holds
// deliveries, which it then fails to settle; extended's
// capacity of 2,000 is run with engine.WithExtendedCapacity and
// model.WithExtendedCapacity (docs/contract.md, the typed library's capacity). FaultMix names the mix that
// exposes each deliberate engine fault of a tributary_faults build; the
// fault tests (faults_test.go) require every fault to be caught.
//
// # What is not checked
//
// A check covers the histories the workloads produce; it says nothing of
// interleavings they never hit. Errors are compared by kind, not by
// message; a nil and an empty slice compare equal. Record times are
// compared only under a test clock, and then only the clock's readings
// between calls: when in a call the engine reads its clock is not checked
// (the gate hides it); under a session timeout that covers expiry too.
// The model's Create expires nobody (rule 2 leaves an existing topic
// untouched); an engine whose Create did expire would differ only where
// members expired at two readings in two rebalances, instead of in one
// later rebalance, get different owners (Sticky), which the mixes rarely
// make. A user's own
// Assignor cannot be recorded (a history
// names assignors, and the model knows only the built-in ones and Picky).
// The inspection methods (LogStartOffset, Committed, Attempts, …), Topics,
// AppendPoll and Snapshot are not recorded (Snapshot's description is
// Describe's, which is; its records are checked by engine's tests), nor
// are options out of range (New's errors). RunOn drives no test clock, so
// another backend's session timeout is not checked here (backendtest's rule
// suite holds backends to rules 24–25), and it refuses a mix with Heartbeat
// or Rejoin on a Target that is not a LivenessTarget. Liveness (no deadlock, no call waiting for a future event) is
// checked only in that every run finishes.
package porcupine
