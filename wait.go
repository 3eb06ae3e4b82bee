package tributary

import (
	"context"
	"sync/atomic"
	"time"
)

// blocking is the loop of the engine backend's blocking calls (Poll, and
// Publish to a full partition): the engine's wake-up signals are channels
// that it closes on the next change that can make a try succeed, so a
// caller takes them first, tries, and only then waits on them; a change
// after the try closes a channel it already holds, so no wake-up is lost,
// and it never tries without a change in between (no busy loop). The
// caller makes its first try before run, without a signal, so a call that
// succeeds at once touches none.
type blocking[T any] struct {
	// arm takes the signals for the next wait; a nil channel is none.
	arm func() (a, b <-chan struct{}, err error)
	// try tries once; done ends run, which returns out and err (a try
	// that fails is done). woken: an earlier round of this run waited and
	// was woken.
	try func(woken bool) (out T, done bool, err error)
	// timeout, if set, bounds the next wait (ok false: unbounded), so a
	// change the engine signals on no channel (an ack timeout running
	// out) is tried too; it is read after the try.
	timeout func() (d time.Duration, ok bool)
	// stopped is the error when stop closes.
	stopped func() error
	// stats, if set, counts the waits and the wake-ups.
	stats *waitStats
}

// waitStats counts a blocking call's waits and those of them ended by a
// signal or a timeout (not by ctx or stop).
type waitStats struct {
	waits, wakeups atomic.Int64
}

// run repeats arm, try and wait until a try is done, returning what it
// returned; or until ctx ends (ctx.Err()) or stop closes
// (stopped()), or arm fails, returning the last try's out with that error
// (out, the caller's own first try's, before run's first). ctx and stop
// are read only while waiting, so a try that is done wins over both.
func (c blocking[T]) run(ctx context.Context, stop <-chan struct{}, out T) (T, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	woken := false
	for {
		a, b, err := c.arm()
		if err != nil {
			return out, err
		}
		var done bool
		if out, done, err = c.try(woken); done {
			return out, err
		}
		var expiry <-chan time.Time
		if c.timeout != nil {
			if d, ok := c.timeout(); ok {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				expiry = timer.C
			}
		}
		if c.stats != nil {
			c.stats.waits.Add(1)
		}
		select {
		case <-a:
		case <-b:
		case <-expiry:
		case <-ctx.Done():
			return out, ctx.Err()
		case <-stop:
			return out, c.stopped()
		}
		if c.stats != nil {
			c.stats.wakeups.Add(1)
		}
		woken = true
	}
}
