package engine

import "sync/atomic"

// signal is a broadcast wake-up: Wait returns a channel that the next Notify
// closes. A waiter takes the channel first, then checks the state it waits
// for, then blocks on the channel, so a change made after its check always
// closes the channel it holds (SPEC rule 14 is untouched: no call of the
// broker waits; only a caller that chose to block on the channel does).
//
// Notify costs one atomic load when nobody waits, so the publish and ack
// paths pay nothing measurable for it. With waiters, the notifier that swaps
// the channel out closes it: every waiter wakes at once.
//
// Ordering: Wait's store (or load) of the channel and Notify's load are
// sequentially consistent atomics; a notifier changes state (under a
// partition lock) before its load, and a waiter stores before it reads the
// state (under the same lock, or through the atomics a rebalance publishes),
// so either the waiter sees the change or the notifier sees the channel.
type signal struct {
	ch atomic.Pointer[chan struct{}]
}

// wait returns the channel the next notify closes.
func (s *signal) wait() <-chan struct{} {
	for {
		if p := s.ch.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if s.ch.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// notify closes the channel waiters hold, if any. It is small enough to
// inline, so with nobody waiting the caller pays one atomic load and a
// branch; wake, out of line, does the rest.
func (s *signal) notify() {
	if s.ch.Load() != nil {
		s.wake()
	}
}

// wake swaps the channel out and closes it; of concurrent notifiers, the
// one whose swap succeeds closes it.
func (s *signal) wake() {
	if p := s.ch.Load(); p != nil && s.ch.CompareAndSwap(p, nil) {
		close(*p)
	}
}
