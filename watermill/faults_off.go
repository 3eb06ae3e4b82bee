//go:build !tributary_faults

package tributarywm

import "github.com/ThreeDotsLabs/watermill/message"

// hooks is empty in a normal build, and each of its methods is the
// adapter's own step: a filter returns its first argument and nacked
// returns Retry. Each inlines, so the adapter compiles as if the seam
// were not there. faults.go says where each seam is and what its broken
// variant does.
type hooks struct{}

// received returns wm, the message a delivery hands out.
func (hooks) received(wm *message.Message) *message.Message { return wm }

// acked returns c, the channel closed when the handler acks.
func (hooks) acked(c <-chan struct{}) <-chan struct{} { return c }

// nacked returns the settle of a nacked message, retry, and true: it is
// released for redelivery, not committed.
func (hooks) nacked(retry, _ settleFunc) (settleFunc, bool) { return retry, true }

// lastAttempt returns last: whether the nacked message was on its group's
// last attempt, so that it is dead-lettered.
func (hooks) lastAttempt(last bool) bool { return last }
