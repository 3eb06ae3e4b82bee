package engine

import (
	"hash/maphash"
	"slices"
	"sync/atomic"
)

// registry maps identifiers to *V for the broker's topics and each topic's
// groups. Load takes no lock and writes no shared memory, so it costs about
// what a Go map lookup costs; Store and Delete are serialised by a lock the
// caller holds (Broker.createMu for topics, topic.mu for groups) and cost
// amortised O(1): creating the N-th topic or group does not copy the N-1
// before it (a copy-on-write map would).
//
// The table is open addressing with linear probing over slots that hold
// immutable *regSlot values, published with atomic stores. Delete leaves a
// tombstone (a slot whose val is nil) so that probe chains stay intact; a
// table more than three quarters used (live plus tombstones) is rebuilt at
// twice the live size and published whole through the atomic table pointer.
// A reader that loaded the old table finishes its probe there: a table is
// never written again once replaced, so such a reader sees the registry as
// it was when it loaded the table pointer, which is its linearization
// point.
//
// A registry that has never held more than smallRegistry entries (most
// topics have a few groups) is instead one immutable array, replaced whole
// on every change and searched by comparing keys, which costs less than
// hashing one. Once it outgrows that it stays a hash table.
//
// The zero registry is empty and ready for Load; Store initialises it.
type registry[V any] struct {
	tab atomic.Pointer[regTable[V]]
	// live and used count the live entries and the used slots (live plus
	// tombstones) of the current table; guarded by the caller's lock.
	live, used int
}

// smallRegistry is the most entries a registry keeps in its small form.
const smallRegistry = 8

type regTable[V any] struct {
	small []regSlot[V] // the small form: every entry, when slots is nil

	seed  maphash.Seed
	mask  uint64 // len(slots) - 1; len(slots) is a power of two
	slots []atomic.Pointer[regSlot[V]]
}

// regSlot is one key's entry; immutable once published. val is nil for a
// tombstone.
type regSlot[V any] struct {
	key string
	val *V
}

// Load returns the value stored under key, or nil.
func (r *registry[V]) Load(key string) *V {
	t := r.tab.Load()
	if t == nil {
		return nil
	}
	if t.slots == nil {
		for i := range t.small {
			if t.small[i].key == key {
				return t.small[i].val
			}
		}
		return nil
	}
	i := maphash.String(t.seed, key)
	for {
		i &= t.mask
		s := t.slots[i].Load()
		if s == nil {
			return nil
		}
		if s.key == key {
			return s.val // nil for a tombstone: key is absent
		}
		i++
	}
}

// Store adds key → v; key must be absent (the caller checked with Load
// under its lock). The caller holds the registry's write lock.
func (r *registry[V]) Store(key string, v *V) {
	t := r.tab.Load()
	if (t == nil || t.slots == nil) && r.live < smallRegistry {
		small := make([]regSlot[V], 0, r.live+1)
		if t != nil {
			small = append(small, t.small...)
		}
		r.tab.Store(&regTable[V]{small: append(small, regSlot[V]{key: key, val: v})})
		r.live++
		return
	}
	if t.slots == nil || (r.used+1)*4 > len(t.slots)*3 {
		t = r.rebuild(t)
	}
	i := maphash.String(t.seed, key)
	for {
		i &= t.mask
		s := t.slots[i].Load()
		if s == nil || s.val == nil {
			// An empty slot or a tombstone. Reusing a tombstone is safe: key
			// is absent, so no probe for key depends on what lies beyond.
			if s == nil {
				r.used++
			}
			t.slots[i].Store(&regSlot[V]{key: key, val: v})
			r.live++
			return
		}
		i++
	}
}

// Delete removes key, which must be present. The caller holds the
// registry's write lock.
func (r *registry[V]) Delete(key string) {
	t := r.tab.Load()
	if t.slots == nil {
		i := slices.IndexFunc(t.small, func(s regSlot[V]) bool { return s.key == key })
		if i < 0 {
			panic("engine: registry: Delete of an absent key " + key)
		}
		r.tab.Store(&regTable[V]{small: slices.Delete(slices.Clone(t.small), i, i+1)})
		r.live--
		return
	}
	i := maphash.String(t.seed, key)
	for {
		i &= t.mask
		s := t.slots[i].Load()
		if s == nil {
			panic("engine: registry: Delete of an absent key " + key)
		}
		if s.key == key && s.val != nil {
			t.slots[i].Store(&regSlot[V]{key: key})
			r.live--
			return
		}
		i++
	}
}

// Len returns the number of live entries. The caller holds the write lock.
func (r *registry[V]) Len() int { return r.live }

// AppendValues appends every live value to dst, in no particular order, and
// returns the extended slice. Without the write lock it sees some recent
// state; with it, the current one.
func (r *registry[V]) AppendValues(dst []*V) []*V {
	t := r.tab.Load()
	if t == nil {
		return dst
	}
	for i := range t.small {
		dst = append(dst, t.small[i].val)
	}
	for i := range t.slots {
		if s := t.slots[i].Load(); s != nil && s.val != nil {
			dst = append(dst, s.val)
		}
	}
	return dst
}

// rebuild publishes a hash table of at least 16 slots and twice the live
// entries (of old, in either form), without tombstones, and returns it.
func (r *registry[V]) rebuild(old *regTable[V]) *regTable[V] {
	n := 16
	for n < 2*(r.live+1) {
		n *= 2
	}
	t := &regTable[V]{seed: maphash.MakeSeed(), mask: uint64(n - 1), slots: make([]atomic.Pointer[regSlot[V]], n)}
	put := func(s *regSlot[V]) {
		i := maphash.String(t.seed, s.key)
		for {
			i &= t.mask
			if t.slots[i].Load() == nil {
				t.slots[i].Store(s)
				return
			}
			i++
		}
	}
	for k := range old.small {
		put(&regSlot[V]{key: old.small[k].key, val: old.small[k].val})
	}
	for k := range old.slots {
		if s := old.slots[k].Load(); s != nil && s.val != nil {
			put(s)
		}
	}
	r.used = r.live
	r.tab.Store(t)
	return t
}
