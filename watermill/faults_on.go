//go:build tributarywm_faults

package tributarywm

import "os"

// FaultEnv names the environment variable that switches one deliberately
// broken behaviour on, in a build with the tributarywm_faults tag; the
// test TestSuiteCatchesFaults checks that Watermill's universal suite
// fails with each of them:
//
//   - drop-metadata: received messages carry no metadata;
//   - ack-on-send: a message is acked as soon as it is handed out, so its
//     partition's next message follows without waiting for the handler;
//   - nack-acks: a nacked message is acked instead of delivered again;
//   - nack-ignores-dead-letter: a message nacked on its group's last
//     attempt is delivered again instead of dead-lettered.
const FaultEnv = "TRIBUTARYWM_FAULT"

var activeFault = os.Getenv(FaultEnv)

func fault(name string) bool { return activeFault == name }
