package jetstream

import (
	"fmt"
)

// RaiseLowWithoutPurge compare-and-sets partition p's log start to low
// without purging the stream: the state a process leaves when it dies
// between retention's compare-and-set on low and its purge. low must not
// be below the current log start.
func RaiseLowWithoutPurge(b *Backend, t string, p int32, low int64) error {
	lv, rev, err := b.readLow(t, p)
	if err != nil {
		return err
	}
	if low < lv.Low {
		return fmt.Errorf("low %d below the log start %d", low, lv.Low)
	}
	_, ok, err := b.put(lowKey(t, p), lowVal{Low: low}, rev)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("low of %s/%d moved meanwhile", t, p)
	}
	return nil
}

// StreamState returns partition p's stream's first sequence and message
// count: what the stream holds, whatever low says.
func StreamState(b *Backend, t string, p int32) (first, msgs uint64, err error) {
	s, err := b.partStream(t, p)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := b.ctx()
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	return info.State.FirstSeq, info.State.Msgs, nil
}

// SetLossy makes b's state writes of keys for which f returns true fail
// as if the network lost them: the request (written false, asked before
// sending) or its reply (written true, asked after the server applied the
// write). nil restores normal writes. Set it before the calls it affects.
func SetLossy(b *Backend, f func(key string, written bool) bool) { b.lossy = f }

// SetReading makes b call f before each read of one state key (key by
// key, not a snapshot read); nil removes it. Set it before the calls it
// affects.
func SetReading(b *Backend, f func(key string)) { b.reading = f }
