package tributarywm

//lint:file-ignore U1000 the faults are named here for the tributary_faults build (faults_on.go).

import "github.com/f91dcac0/tributary"

// Deliberate bugs of the adapter, for proving that Watermill's universal
// suite, run as this package runs it, can fail (faults_test.go). Each is
// the broken variant of one seam, a method of the subscription's hooks
// that subscriber.go calls where the step is:
//
//   - received filters the Watermill message a delivery hands out;
//     drop-metadata: it carries no metadata.
//   - acked filters the channel that tells the delivery its message was
//     acked; ack-on-send: a closed one, so the message is acked as soon as
//     it is handed out and its partition's next message follows without
//     waiting for the handler.
//   - nacked picks the settle of a nacked message (Retry, for redelivery);
//     nack-acks: the Ack it was given, so the message is not delivered
//     again.
//   - lastAttempt filters whether a nacked message was on its group's
//     last attempt; nack-ignores-dead-letter: never, so it is delivered
//     again instead of dead-lettered.
//
// The broken variants exist only in builds with the tributary_faults
// build tag (faults_on.go), where the environment variable
// TRIBUTARY_FAULT names the one switched on for the process. In every
// other build hooks is an empty struct whose methods are the correct steps
// (faults_off.go): the identity, which the compiler inlines, so the normal
// build pays nothing.
//
// docs/testing.md ("Deliberate faults") describes the mechanism that every
// package's faults share.

// fault identifies one deliberate bug; faultNone is the correct adapter.
type fault uint8

const (
	faultNone fault = iota
	faultDropMetadata
	faultAckOnSend
	faultNackAcks
	faultNackIgnoresDeadLetter
	faultCount
)

// settleFunc is a consumer's settle of one message: Ack, Retry or a Nack
// to the dead-letter topic.
type settleFunc = func(tributary.Message[[]byte]) error
