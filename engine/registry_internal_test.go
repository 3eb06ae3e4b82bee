package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of the registry (registry.go) against a Go map as the oracle: every
// Load agrees with the map, AppendValues lists exactly the map's values, and
// concurrent Loads see each key either absent or mapped to its own value.

// regOracle drives a registry[int] and a map[string]*int side by side; the
// caller is the registry's only writer, so it needs no lock.
type regOracle struct {
	t    *testing.T
	r    registry[int]
	m    map[string]*int
	ops  int
	keys []string        // every key ever used, once, for Loads of absent keys
	seen map[string]bool // the set of keys
	live []string        // the keys of m, in no order
	at   map[string]int  // live[at[k]] == k
}

func newRegOracle(t *testing.T) *regOracle {
	return &regOracle{t: t, m: map[string]*int{}, seen: map[string]bool{}, at: map[string]int{}}
}

func (o *regOracle) store(key string) {
	o.t.Helper()
	if _, ok := o.m[key]; ok {
		o.t.Fatalf("op %d: test bug: store of present key %q", o.ops, key)
	}
	v := new(int)
	*v = o.ops
	o.r.Store(key, v)
	o.m[key] = v
	if !o.seen[key] {
		o.seen[key] = true
		o.keys = append(o.keys, key)
	}
	o.at[key] = len(o.live)
	o.live = append(o.live, key)
	o.ops++
	o.check(key)
}

func (o *regOracle) delete(key string) {
	o.t.Helper()
	if _, ok := o.m[key]; !ok {
		o.t.Fatalf("op %d: test bug: delete of absent key %q", o.ops, key)
	}
	o.r.Delete(key)
	delete(o.m, key)
	i, last := o.at[key], o.live[len(o.live)-1]
	o.live[i], o.at[last] = last, i
	o.live = o.live[:len(o.live)-1]
	delete(o.at, key)
	o.ops++
	o.check(key)
}

// check compares the registry with the map: the key just changed and the
// live count always; every live key and AppendValues while the registry is
// small; every key ever used every 499 operations.
func (o *regOracle) check(changed string) {
	o.t.Helper()
	if got, want := o.r.Load(changed), o.m[changed]; got != want {
		o.t.Fatalf("op %d: Load(%q) = %p, want %p (live %d)", o.ops, changed, got, want, len(o.m))
	}
	if got, want := o.r.Len(), len(o.m); got != want {
		o.t.Fatalf("op %d: Len() = %d, want %d", o.ops, got, want)
	}
	switch {
	case o.ops%499 == 0:
		o.checkAll()
	case len(o.m) <= 2*smallRegistry:
		o.checkLive()
	}
}

// checkAll checks every key ever used, some never used, and AppendValues.
func (o *regOracle) checkAll() {
	o.t.Helper()
	for _, k := range o.keys {
		if got, want := o.r.Load(k), o.m[k]; got != want {
			o.t.Fatalf("op %d: Load(%q) = %p, want %p (live %d)", o.ops, k, got, want, len(o.m))
		}
	}
	for _, k := range []string{"", "never-stored", "x"} {
		if got := o.r.Load(k); got != o.m[k] {
			o.t.Fatalf("op %d: Load(%q) = %p, want %p", o.ops, k, got, o.m[k])
		}
	}
	o.checkLive()
}

// checkLive checks every live key and AppendValues.
func (o *regOracle) checkLive() {
	o.t.Helper()
	for _, k := range o.live {
		if got, want := o.r.Load(k), o.m[k]; got != want {
			o.t.Fatalf("op %d: Load(%q) = %p, want %p (live %d)", o.ops, k, got, want, len(o.m))
		}
	}
	got := o.r.AppendValues(nil)
	want := slices.Collect(maps.Values(o.m))
	byValue := func(a, b *int) int { return *a - *b }
	slices.SortFunc(got, byValue)
	slices.SortFunc(want, byValue)
	if !slices.Equal(got, want) {
		o.t.Fatalf("op %d: AppendValues has %d values, want the map's %d (or different ones)", o.ops, len(got), len(want))
	}
	// AppendValues appends: what dst held stays in front.
	sentinel := new(int)
	if got := o.r.AppendValues([]*int{sentinel}); len(got) != len(want)+1 || got[0] != sentinel {
		o.t.Fatalf("op %d: AppendValues(dst) did not append to dst", o.ops)
	}
}

func TestRegistryEmpty(t *testing.T) {
	var r registry[int]
	if v := r.Load("a"); v != nil {
		t.Fatalf("zero registry: Load = %p, want nil", v)
	}
	if vs := r.AppendValues(nil); vs != nil {
		t.Fatalf("zero registry: AppendValues(nil) = %v, want nil", vs)
	}
	if n := r.Len(); n != 0 {
		t.Fatalf("zero registry: Len = %d, want 0", n)
	}
}

// TestRegistryScripted walks the registry through its forms in a fixed
// order: the small form up to 8 entries, the hash form from 9, growth,
// deletes down to a few entries (tombstones), re-insertion of deleted
// keys, and growth again.
func TestRegistryScripted(t *testing.T) {
	key := func(i int) string { return "k" + strconv.Itoa(i) }
	tests := []struct {
		name string
		run  func(o *regOracle)
	}{
		{"small form only", func(o *regOracle) {
			for i := range smallRegistry {
				o.store(key(i))
			}
			for i := range smallRegistry {
				o.delete(key(i))
				o.store(key(i)) // re-insert after delete
			}
			for i := range smallRegistry {
				o.delete(key(i))
			}
		}},
		{"9 entries: hash form", func(o *regOracle) {
			for i := range smallRegistry + 1 {
				o.store(key(i))
			}
		}},
		{"hash form shrinks below 9, then stores", func(o *regOracle) {
			for i := range smallRegistry + 1 {
				o.store(key(i))
			}
			o.delete(key(0))
			o.delete(key(1)) // 7 live entries, still the hash form
			o.store(key(100))
			o.store(key(0)) // re-insert a deleted key
		}},
		{"grow to 1000, delete all, re-insert", func(o *regOracle) {
			for i := range 1000 {
				o.store(key(i))
			}
			for i := range 1000 {
				o.delete(key(i))
			}
			for i := range 1000 {
				o.store(key(i))
			}
		}},
		{"tombstone churn in a fixed-size set", func(o *regOracle) {
			// 20 live keys, each deleted and replaced by a new one: many
			// tombstones, so rebuilds must happen without growth.
			for i := range 20 {
				o.store(key(i))
			}
			for i := 20; i < 5000; i++ {
				o.delete(key(i - 20))
				o.store(key(i))
			}
		}},
		{"delete one, store it again, repeatedly", func(o *regOracle) {
			for i := range 50 {
				o.store(key(i))
			}
			for range 500 {
				o.delete(key(7))
				o.store(key(7))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newRegOracle(t)
			tt.run(o)
			o.checkAll()
		})
	}
}

// TestRegistryRandomOperations runs random Store/Delete sequences against
// the map oracle. The live count swings between a random low point below
// the small form's limit and a random high point, so the registry crosses
// from the small form to the hash form and back, grows, and fills with
// tombstones, many times over.
func TestRegistryRandomOperations(t *testing.T) {
	tests := []struct {
		name     string
		keySpace int // keys are drawn from k0..k(keySpace-1)
		maxHigh  int // the high points are drawn from smallRegistry+1..maxHigh
		ops      int
	}{
		{"around the small limit", 16, 12, 4000},
		{"up to 64", 100, 64, 6000},
		{"up to 1000", 1500, 1000, 12000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(3) {
				t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 0x5eed))
					o := newRegOracle(t)
					filling, high, low := true, tt.maxHigh, 0
					for range tt.ops {
						switch {
						case filling && len(o.m) >= high:
							filling, low = false, rng.IntN(smallRegistry)
						case !filling && len(o.m) <= low:
							filling, high = true, smallRegistry+1+rng.IntN(tt.maxHigh-smallRegistry)
						}
						// Mostly store a random absent key while filling and
						// delete a random present one while draining; now and
						// then the other way round.
						store := filling == (rng.IntN(8) != 0) || len(o.live) == 0
						if !store {
							o.delete(o.live[rng.IntN(len(o.live))])
							continue
						}
						k := "k" + strconv.Itoa(rng.IntN(tt.keySpace))
						for o.m[k] != nil {
							k = "k" + strconv.Itoa(rng.IntN(tt.keySpace))
						}
						o.store(k)
					}
					o.checkAll()
				})
			}
		})
	}
}

// TestRegistryConcurrentLoads: readers Load without a lock while a writer,
// holding a mutex as the registry's contract asks, stores and deletes keys
// through every form. A reader must see each key either absent or mapped to
// its own value, never another key's value or a torn entry. Run with -race.
func TestRegistryConcurrentLoads(t *testing.T) {
	const keys = 300
	names := make([]string, keys)
	vals := make([]int, keys)
	for i := range names {
		names[i] = "key-" + strconv.Itoa(i)
		vals[i] = i
	}
	var (
		mu      sync.Mutex // the registry's write lock
		r       registry[int]
		stop    atomic.Bool
		bad     atomic.Int64
		present atomic.Int64 // Loads that found the key, to show the readers saw something
		wg      sync.WaitGroup
	)
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				i := rng.IntN(keys)
				if v := r.Load(names[i]); v != nil {
					present.Add(1)
					if v != &vals[i] {
						bad.Add(1)
					}
				}
			}
		})
	}
	in := make([]bool, keys)
	// write runs the writer; a registry panic (a Delete that cannot find a
	// present key) becomes the test's failure once the readers stopped.
	write := func() (failure any) {
		defer func() { failure = recover() }()
		rng := rand.New(rand.NewPCG(9, 9))
		deadline := time.Now().Add(300 * time.Millisecond)
		for round := 0; time.Now().Before(deadline) || round < 4; round++ {
			// Fill to a random size, then empty to a random size below the
			// small form's limit: every form, both ways.
			target := rng.IntN(keys) + 1
			for i := range target {
				mu.Lock()
				if !in[i] {
					r.Store(names[i], &vals[i])
					in[i] = true
				}
				mu.Unlock()
			}
			low := rng.IntN(smallRegistry + 2)
			for i := keys - 1; i >= low; i-- {
				mu.Lock()
				if in[i] {
					in[i] = false
					r.Delete(names[i])
				}
				mu.Unlock()
			}
		}
		return nil
	}
	failure := write()
	stop.Store(true)
	wg.Wait()
	if failure != nil {
		mu.Unlock() // the writer panicked holding it
		t.Fatalf("writer: %v", failure)
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d concurrent Loads returned another key's value", n)
	}
	if present.Load() == 0 {
		t.Fatalf("the readers never found a key: the test did not exercise the registry")
	}
	// After the writer stopped, the registry is exactly in.
	mu.Lock()
	defer mu.Unlock()
	for i, ok := range in {
		if got := r.Load(names[i]); (got != nil) != ok || ok && got != &vals[i] {
			t.Fatalf("final Load(%q) = %p, want present=%v (%p)", names[i], got, ok, &vals[i])
		}
	}
}

// BenchmarkRegistryLoad measures a hit in a registry of n entries against a
// Go map of the same entries, in the same run.
func BenchmarkRegistryLoad(b *testing.B) {
	for _, n := range []int{1, 8, 9, 1000, 100000} {
		keys := make([]string, n)
		m := make(map[string]*int, n)
		var r registry[int]
		for i := range keys {
			keys[i] = "group-" + strconv.Itoa(i)
			v := new(int)
			m[keys[i]] = v
			r.Store(keys[i], v)
		}
		b.Run(fmt.Sprintf("n=%d/registry", n), func(b *testing.B) {
			b.ReportAllocs()
			i, miss := 0, 0
			for b.Loop() {
				if r.Load(keys[i]) == nil {
					miss++
				}
				if i++; i == n {
					i = 0
				}
			}
			if miss > 0 {
				b.Fatalf("%d misses", miss)
			}
		})
		b.Run(fmt.Sprintf("n=%d/map", n), func(b *testing.B) {
			b.ReportAllocs()
			i, miss := 0, 0
			for b.Loop() {
				if m[keys[i]] == nil {
					miss++
				}
				if i++; i == n {
					i = 0
				}
			}
			if miss > 0 {
				b.Fatalf("%d misses", miss)
			}
		})
	}
}
