package jetstream

import (
	"bytes"
	"encoding/json"
	"maps"
	"sync"
)

// groupCache holds the group values a Backend decoded last, one per group
// key, so that a read finding a group key at a value it decoded before
// skips encoding/json: in the steady state (no rebalance) every Poll, Ack
// and retention pass reads the same group value, and decoding it was the
// largest part of their client-side CPU. A hit is decided by the stored
// bytes, not the revision: equal bytes decode to equal values, whatever
// stream or revision they came from (a state stream deleted and created
// again reuses revisions). It holds at most groupCacheSize keys, dropping
// an arbitrary one to make room. What is stored is unchanged: the cache
// only skips decoding what it decoded before.
//
// Each caller gets a copy of the cached value with slices and map of its
// own (groupVal.clone), so a caller may change what it got (append to
// Members, write Owners[p], set Incs) without touching the cache or
// another caller's copy. The zero value is ready to use.
type groupCache struct {
	mu   sync.Mutex
	vals map[string]*cachedGroup // group key → its last decoded value
}

// groupCacheSize bounds a groupCache: the groups one process reads in its
// steady state fit many times over; past it a miss costs one decode.
const groupCacheSize = 256

// cachedGroup is one decoded group value; never changed once cached (a
// new value of the key replaces it).
type cachedGroup struct {
	data []byte   // the stored value decoded (a copy of the message's)
	gv   groupVal // what data decodes to; handed out only as clones
}

// decode decodes data, the value of group key key (not a tombstone), into
// gv as json.Unmarshal into a zero groupVal would. A nil c decodes.
func (c *groupCache) decode(key string, data []byte, gv *groupVal) error {
	if c == nil {
		return json.Unmarshal(data, gv)
	}
	c.mu.Lock()
	e := c.vals[key]
	c.mu.Unlock()
	if e != nil && bytes.Equal(e.data, data) {
		*gv = e.gv.clone()
		return nil
	}
	var fresh groupVal
	if err := json.Unmarshal(data, &fresh); err != nil {
		return err
	}
	*gv = fresh.clone()
	e = &cachedGroup{data: bytes.Clone(data), gv: fresh}
	c.mu.Lock()
	if c.vals == nil {
		c.vals = make(map[string]*cachedGroup)
	}
	if _, ok := c.vals[key]; !ok && len(c.vals) >= groupCacheSize {
		for k := range c.vals {
			delete(c.vals, k)
			break
		}
	}
	c.vals[key] = e
	c.mu.Unlock()
	return nil
}

// clone returns g with slices and map of its own (nil stays nil, empty
// stays empty, as decoding gives them), the strings shared (immutable).
// Members and Owners share one allocation, each capped at its length, so
// that appending to one never writes into the other.
func (g groupVal) clone() groupVal {
	nm := len(g.Members)
	if g.Members != nil || g.Owners != nil {
		buf := make([]string, nm+len(g.Owners))
		copy(buf, g.Members)
		copy(buf[nm:], g.Owners)
		members, owners := buf[:nm:nm], buf[nm:len(buf):len(buf)]
		if g.Members == nil {
			members = nil
		}
		if g.Owners == nil {
			owners = nil
		}
		g.Members, g.Owners = members, owners
	}
	if g.Since != nil {
		g.Since = append(make([]uint64, 0, len(g.Since)), g.Since...)
	}
	g.Incs = maps.Clone(g.Incs)
	return g
}
