package jetstream

import (
	"context"
	"time"
)

// block is the loop of a blocked Poll or Publish. It subscribes to
// subjects first (wakeOn: a message on any of them is a change that can
// make a try succeed), so a change after a try that was not done wakes the
// wait that follows it and none is lost; then it tries, and until a try is
// done waits for a wake-up or for that try's wait to pass (a reconnect may
// lose a wake-up; a poll's next ack-timeout expiry), and tries again. It
// returns the done try's out and err; ctx.Err() when ctx ends and
// stopped(false) when stop closes, or stopped(true) when the Backend
// closes, with the last try's out; or the subscription's error with out
// (the caller's own first try's, made before block without subscribing,
// so a call that succeeds at once costs no subscription).
func block[T any](ctx context.Context, stop <-chan struct{}, b *Backend, subjects []string, out T,
	try func() (out T, wait time.Duration, done bool, err error), stopped func(backendClosed bool) error,
) (T, error) {
	wake, unsub, err := b.wakeOn(subjects...)
	if err != nil {
		return out, err
	}
	defer unsub()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		o, wait, done, err := try()
		if out = o; done {
			return out, err
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return out, ctx.Err()
		case <-stop:
			return out, stopped(false)
		case <-b.closed:
			return out, stopped(true)
		}
	}
}
