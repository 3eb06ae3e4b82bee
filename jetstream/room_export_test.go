package jetstream

import "time"

// SetRoomWait sets how long b's blocked Publish waits between tries when no
// wake-up arrives (fallbackWait by default). Call it before b publishes.
func SetRoomWait(b *Backend, d time.Duration) { b.roomWait = d }

// SetPollWait sets how long b's blocked Poll waits between tries when no
// wake-up arrives (fallbackWait by default). Call it before b polls.
func SetPollWait(b *Backend, d time.Duration) { b.pollWait = d }
