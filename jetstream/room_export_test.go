package jetstream

import "time"

// SetRoomWait sets how long b's blocked Publish waits between tries when no
// wake-up arrives (fallbackWait by default). Call it before b publishes.
func SetRoomWait(b *Backend, d time.Duration) { b.roomWait = d }
