//go:build tributary_faults

package tributarywm

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/f91dcac0/tributary/internal/faults"
)

// faultNames is the adapter's fault table (internal/faults), indexed by
// fault: the names TRIBUTARY_FAULT (faults.Env) accepts.
var faultNames = [faultCount]string{
	faults.None,
	"drop-metadata",
	"ack-on-send",
	"nack-acks",
	"nack-ignores-dead-letter",
}

// injected is the fault TRIBUTARY_FAULT names, for every subscription of
// the process: the suite builds its subscribers itself, in a test binary
// run as a subprocess. A name not in faultNames stops the binary.
var injected = func() fault {
	f, err := faults.Table(faultNames[:]).FromEnv()
	if err != nil {
		panic(fmt.Sprintf("tributarywm: %v", err))
	}
	return fault(f)
}()

// hooks is empty: the fault is the process's (injected).
type hooks struct{}

// closedChan is a closed channel: what acked returns for ack-on-send.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// received is drop-metadata: the message loses its metadata.
func (hooks) received(wm *message.Message) *message.Message {
	if injected == faultDropMetadata {
		clear(wm.Metadata)
	}
	return wm
}

// acked is ack-on-send: the message counts as acked once handed out.
func (hooks) acked(c <-chan struct{}) <-chan struct{} {
	if injected == faultAckOnSend {
		return closedChan
	}
	return c
}

// nacked is nack-acks: a nacked message is acked.
func (hooks) nacked(retry, ack settleFunc) (settleFunc, bool) {
	if injected == faultNackAcks {
		return ack, false
	}
	return retry, true
}

// lastAttempt is nack-ignores-dead-letter: no attempt is the last.
func (hooks) lastAttempt(last bool) bool {
	return last && injected != faultNackIgnoresDeadLetter
}
