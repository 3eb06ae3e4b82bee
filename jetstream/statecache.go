package jetstream

import (
	"bytes"
	"encoding/json"
	"maps"
	"sync"
	"unicode/utf8"
)

// stateCache holds, per state key, the value a Backend last decoded or
// wrote there (group, cursor and low keys), so that a read finding a key
// at that value skips encoding/json. In the steady state every Poll, Ack
// and retention pass reads the same group value, and the cursors and lows
// it reads are the ones the previous call of this process wrote; decoding
// them was the largest part of those calls' client-side CPU. A hit is
// decided by the stored bytes, not the revision: equal bytes decode to
// equal values, whatever stream or revision they came from (a state
// stream deleted and created again reuses revisions). It holds at most
// stateCacheSize keys, dropping an arbitrary one to make room. What is
// stored is unchanged: the cache only skips decoding.
//
// Each caller gets a copy of the cached value with slices and maps of its
// own (groupVal.clone, lowVal's Holds cloned), so a caller may change what
// it got (append to Members, write Owners[p], set Incs) without touching
// the cache or another caller's copy. A cached value is never changed. The
// zero value is ready to use; a nil *stateCache decodes every time.
type stateCache struct {
	mu   sync.Mutex
	vals map[string]cachedVal // state key → its last value seen
}

// stateCacheSize bounds a stateCache: a 16-partition topic's group uses
// 33 keys (the group, 16 cursors, 16 lows); past the bound a miss costs
// one decode.
const stateCacheSize = 1024

// cachedVal is one key's cached value.
type cachedVal struct {
	data []byte // the stored value (never changed)
	v    any    // what data decodes to: *groupVal, *cursorVal or *lowVal
}

// decode decodes data, the value of key (not a tombstone), into v as
// json.Unmarshal does. A group, cursor or low value decoded into a zero
// target goes through the cache; any other v, or a target already
// holding a value (json.Unmarshal merges into it), is decoded.
func (c *stateCache) decode(key string, data []byte, v any) error {
	if c == nil || !cacheable(v) {
		return json.Unmarshal(data, v)
	}
	if e, ok := c.lookup(key, data); ok && e.copyTo(v) {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	var keep any
	switch t := v.(type) {
	case *groupVal:
		gv := t.clone()
		keep = &gv
	case *cursorVal:
		cv := *t
		keep = &cv
	case *lowVal:
		lv := t.clone()
		keep = &lv
	}
	c.store(key, bytes.Clone(data), keep)
	return nil
}

// wrote records v, written to key as data by a put that succeeded, as the
// key's value: the next read of it, by this process, skips decoding. Only
// cursor and low values, and only those that decode back to themselves
// exactly (strings of valid UTF-8, which encoding/json keeps as they are;
// empty Holds is stored as none): a cursor and a low are written by one
// call of this process and read by its next.
func (c *stateCache) wrote(key string, data []byte, v any) {
	if c == nil {
		return
	}
	switch t := v.(type) {
	case cursorVal:
		if utf8.ValidString(t.Owner) && utf8.ValidString(t.MemberInc) {
			c.store(key, data, &t)
		}
	case lowVal:
		for tok := range t.Holds {
			if !utf8.ValidString(tok) {
				return
			}
		}
		lv := t.clone()
		c.store(key, data, &lv)
	}
}

// lookup returns key's entry if it holds data.
func (c *stateCache) lookup(key string, data []byte) (cachedVal, bool) {
	c.mu.Lock()
	e, ok := c.vals[key]
	c.mu.Unlock()
	return e, ok && bytes.Equal(e.data, data)
}

// store makes (data, v) key's entry; data and v are the cache's from now on.
func (c *stateCache) store(key string, data []byte, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vals == nil {
		c.vals = make(map[string]cachedVal)
	}
	if _, ok := c.vals[key]; !ok && len(c.vals) >= stateCacheSize {
		for k := range c.vals {
			delete(c.vals, k)
			break
		}
	}
	c.vals[key] = cachedVal{data: data, v: v}
}

// copyTo sets v, of the entry's type, to a copy of the entry's value;
// false (v untouched) when v is of another type.
func (e cachedVal) copyTo(v any) bool {
	switch t := v.(type) {
	case *groupVal:
		src, ok := e.v.(*groupVal)
		if ok {
			*t = src.clone()
		}
		return ok
	case *cursorVal:
		src, ok := e.v.(*cursorVal)
		if ok {
			*t = *src
		}
		return ok
	case *lowVal:
		src, ok := e.v.(*lowVal)
		if ok {
			*t = src.clone()
		}
		return ok
	}
	return false
}

// cacheable reports whether v is a pointer to a zero group, cursor or
// low value: what decode's cache serves.
func cacheable(v any) bool {
	switch t := v.(type) {
	case *groupVal:
		return t.Inc == 0 && t.Gen == 0 && t.Assignor == "" && t.Members == nil && t.Owners == nil &&
			t.Since == nil && t.Incs == nil && t.groupConfig == groupConfig{}
	case *cursorVal:
		return *t == cursorVal{}
	case *lowVal:
		return t.Low == 0 && t.Evict == 0 && t.Holds == nil
	}
	return false
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

// clone returns lv with Holds of its own; an empty Holds is none, as
// decoding gives it (the field is omitted when empty).
func (lv lowVal) clone() lowVal {
	if len(lv.Holds) == 0 {
		lv.Holds = nil
	} else {
		lv.Holds = maps.Clone(lv.Holds)
	}
	return lv
}
