package jetstream

import (
	"encoding/json"
	"reflect"
	"strconv"
	"sync"
	"testing"
)

// groupValues are stored group values of every shape decoding meets:
// absent, null and empty lists and map, a config, an incarnation.
var groupValues = []string{
	`{"gen":0,"assignor":"range","members":null,"owners":null,"since":null}`,
	`{"gen":1,"assignor":"range","members":[],"owners":[],"since":[]}`,
	`{"gen":2,"assignor":"roundrobin"}`,
	`{"inc":7,"gen":3,"assignor":"roundrobin","members":["a","b"],"owners":["a","b","a",""],"since":[1,2,3,3],"incs":{"a":"00ff","b":"11ee"}}`,
	`{"gen":4,"assignor":"sticky","members":["a"],"owners":["a"],"since":[4],"incs":{},"latest":true,"parts":1,"deadLetter":"dlq","maxAttempts":3,"backoff":1000,"maxBackoff":5000}`,
}

// TestStateCacheGroupDecodesAsJSON: a group value read through the cache, on
// its first read (a miss) and its later ones (hits), is what
// encoding/json decodes, nil and empty lists and maps told apart.
func TestStateCacheGroupDecodesAsJSON(t *testing.T) {
	var c stateCache
	for i, data := range groupValues {
		var want groupVal
		if err := json.Unmarshal([]byte(data), &want); err != nil {
			t.Fatal(err)
		}
		key := groupKey("t", "g"+strconv.Itoa(i))
		for read := range 3 {
			var got groupVal
			if err := c.decode(key, []byte(data), &got); err != nil {
				t.Fatalf("%s read %d: %v", data, read, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s read %d: got %#v, want %#v", data, read, got, want)
			}
		}
	}
	// One key whose value changes: each read gives the value it finds.
	for i, data := range append(groupValues, groupValues[0]) {
		var got, want groupVal
		if err := json.Unmarshal([]byte(data), &want); err != nil {
			t.Fatal(err)
		}
		if err := c.decode("group.t.moving", []byte(data), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("value %d of one key: got %#v, want %#v", i, got, want)
		}
	}
	var gv groupVal
	if err := c.decode("group.t.bad", []byte(`{"gen":"x"}`), &gv); err == nil {
		t.Fatal("a corrupt value decodes without an error")
	}
	if err := c.decode("group.t.bad", []byte(`{"gen":"x"}`), &gv); err == nil {
		t.Fatal("a corrupt value read again decodes without an error")
	}
}

// TestStateCacheGroupCopies: what one read of a cached group returns is its
// own: changing its lists and map (in place and by append) changes
// neither the cache nor another read's copy. The concurrent part is for
// -race: readers changing their copies of one cached value at once.
func TestStateCacheGroupCopies(t *testing.T) {
	var c stateCache
	data := []byte(groupValues[3])
	var want groupVal
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	read := func() groupVal {
		t.Helper()
		var gv groupVal
		if err := c.decode("group.t.g", data, &gv); err != nil {
			t.Fatal(err)
		}
		return gv
	}
	scribble := func(gv *groupVal) {
		gv.Members[0], gv.Owners[0], gv.Since[0] = "x", "x", 99
		gv.Incs["a"], gv.Incs["new"] = "x", "x"
		gv.Members = append(gv.Members, "y")
		gv.Owners = append(gv.Owners, "y")
		gv.Since = append(gv.Since, 100)
		gv.Gen++
	}
	first := read() // a miss
	scribble(&first)
	second := read() // a hit
	if !reflect.DeepEqual(second, want) {
		t.Fatalf("after the first read's copy changed: %#v, want %#v", second, want)
	}
	third := read()
	scribble(&second)
	if !reflect.DeepEqual(third, want) {
		t.Fatalf("after another read's copy changed: %#v, want %#v", third, want)
	}
	// Appending to Members must not write into Owners (one allocation).
	fourth := read()
	fourth.Members = append(fourth.Members, "z")
	if !reflect.DeepEqual(fourth.Owners, want.Owners) {
		t.Fatalf("Owners %q after appending to Members, want %q", fourth.Owners, want.Owners)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				var gv groupVal
				if err := c.decode("group.t.g", data, &gv); err != nil {
					t.Error(err)
					return
				}
				scribble(&gv)
			}
		})
	}
	wg.Wait()
	if got := read(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after concurrent readers changed their copies: %#v, want %#v", got, want)
	}
}

// TestStateCacheBound: the cache holds at most stateCacheSize keys, and
// a key it dropped decodes again.
func TestStateCacheBound(t *testing.T) {
	var c stateCache
	data := []byte(groupValues[3])
	for i := range 3 * stateCacheSize {
		var gv groupVal
		if err := c.decode(groupKey("t", "g"+strconv.Itoa(i)), data, &gv); err != nil {
			t.Fatal(err)
		}
		if n := len(c.vals); n > stateCacheSize {
			t.Fatalf("%d keys cached after %d reads, bound %d", n, i+1, stateCacheSize)
		}
		if gv.Gen != 3 {
			t.Fatalf("read %d: gen %d, want 3", i, gv.Gen)
		}
	}
}

// TestStateCacheGroupAllocs: a read of a cached 16-partition group allocates
// its copy only (the value, which escapes as readGroupIn's does, its
// lists and its map: 5), where decoding it with encoding/json allocates
// many times that. Counts, not timings.
func TestStateCacheGroupAllocs(t *testing.T) {
	gv := groupVal{Gen: 5, Assignor: "roundrobin", Members: []string{"c1", "c2"}, Incs: map[string]string{"c1": "0123456789abcdef", "c2": "fedcba9876543210"}}
	for p := range 16 {
		gv.Owners = append(gv.Owners, gv.Members[p%2])
		gv.Since = append(gv.Since, 5)
	}
	data, err := json.Marshal(gv)
	if err != nil {
		t.Fatal(err)
	}
	var c stateCache
	var out groupVal
	if err := c.decode("group.t.g", data, &out); err != nil {
		t.Fatal(err)
	}
	hit := testing.AllocsPerRun(100, func() {
		var out groupVal
		if err := c.decode("group.t.g", data, &out); err != nil {
			t.Fatal(err)
		}
	})
	decode := testing.AllocsPerRun(100, func() {
		var out groupVal
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per read: cached %v, encoding/json %v", hit, decode)
	if hit > 5 {
		t.Errorf("a cached read allocates %v times, want at most 5 (the value, its lists and map)", hit)
	}
	if decode < 4*hit {
		t.Errorf("encoding/json allocates %v times, the cache %v: no gain to check", decode, hit)
	}
}

// cursorValues and lowValues are cursor and low values of every shape,
// strings of invalid UTF-8 among them (encoding/json changes those).
var (
	cursorValues = []cursorVal{
		{},
		{Inc: 3, Owner: "c1", Gen: 2, Committed: 17},
		{Inc: 3, Owner: "c1", Gen: 2, Committed: 17, InFlight: true, Attempts: 2, DeliveredAt: 1e18, MemberInc: "0123456789abcdef"},
		{Inc: 1, Owner: "bad\xff", Gen: 1, Committed: 1, InFlight: true, Attempts: 1, MemberInc: "\xfe"},
		{Inc: 1, Owner: "<&>", Committed: -1},
	}
	lowValues = []lowVal{
		{},
		{Low: 5},
		{Low: 5, Evict: 105},
		{Low: 5, Holds: map[string]int64{}},
		{Low: 7, Holds: map[string]int64{"00ff": 1e18, "11ee": 2}},
		{Low: 7, Holds: map[string]int64{"bad\xff": 1}},
	}
)

// TestStateCacheWrites: a cursor or low value a put wrote, read back
// (the same bytes), is what encoding/json decodes from those bytes, on
// the first read and later ones; so is one read without a write first.
func TestStateCacheWrites(t *testing.T) {
	check := func(t *testing.T, name string, v any, target func() any) {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want := target()
		if err := json.Unmarshal(data, want); err != nil {
			t.Fatal(err)
		}
		for _, wrote := range []bool{true, false} {
			var c stateCache
			if wrote {
				c.wrote("k", data, v)
			}
			for read := range 3 {
				got := target()
				if err := c.decode("k", data, got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s (written %v) read %d: got %#v, want %#v", name, wrote, read, got, want)
				}
			}
		}
	}
	for i, cv := range cursorValues {
		check(t, "cursor "+strconv.Itoa(i), cv, func() any { return new(cursorVal) })
	}
	for i, lv := range lowValues {
		check(t, "low "+strconv.Itoa(i), lv, func() any { return new(lowVal) })
	}
}

// TestStateCacheCopiesLow: a low read from the cache has Holds of its
// own: changing it changes no other read.
func TestStateCacheCopiesLow(t *testing.T) {
	var c stateCache
	lv := lowValues[4]
	data, err := json.Marshal(lv)
	if err != nil {
		t.Fatal(err)
	}
	c.wrote("low.t.0", data, lv)
	lv.Holds["00ff"] = 0 // the writer's map, changed after the write
	var first, second lowVal
	if err := c.decode("low.t.0", data, &first); err != nil {
		t.Fatal(err)
	}
	first.Holds["11ee"], first.Holds["new"] = 0, 0
	if err := c.decode("low.t.0", data, &second); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"00ff": 1e18, "11ee": 2}; !reflect.DeepEqual(second.Holds, want) {
		t.Fatalf("Holds %v after the writer's and another reader's changed, want %v", second.Holds, want)
	}
}

// TestStateCacheMerges: decoding into a target that holds a value
// merges into it, as encoding/json does (the cache serves zero targets
// only): a field the stored value omits keeps the target's.
func TestStateCacheMerges(t *testing.T) {
	var c stateCache
	data, err := json.Marshal(cursorValues[1]) // inFlight omitted
	if err != nil {
		t.Fatal(err)
	}
	c.wrote("cursor.t.g.0", data, cursorValues[1])
	got := cursorVal{InFlight: true, Attempts: 9}
	if err := c.decode("cursor.t.g.0", data, &got); err != nil {
		t.Fatal(err)
	}
	want := cursorValues[1]
	want.InFlight, want.Attempts = true, 9
	if got != want {
		t.Fatalf("merged %+v, want %+v", got, want)
	}
	gv := groupVal{Incs: map[string]string{"x": "1"}}
	if err := c.decode("group.t.g", []byte(groupValues[2]), &gv); err != nil {
		t.Fatal(err)
	}
	if gv.Incs["x"] != "1" || gv.Gen != 2 {
		t.Fatalf("merged group %+v, want Incs kept and gen 2", gv)
	}
}

// TestStateCacheCursorAllocs: a read of a cursor this process wrote
// allocates nothing; decoding it allocates. Counts, not timings.
func TestStateCacheCursorAllocs(t *testing.T) {
	cv := cursorValues[2]
	data, err := json.Marshal(cv)
	if err != nil {
		t.Fatal(err)
	}
	var c stateCache
	c.wrote("cursor.t.g.0", data, cv)
	var out cursorVal
	hit := testing.AllocsPerRun(100, func() {
		out = cursorVal{}
		if err := c.decode("cursor.t.g.0", data, &out); err != nil {
			t.Fatal(err)
		}
	})
	if hit != 0 || out != cv {
		t.Errorf("a cached cursor read allocates %v times and gives %+v, want 0 and %+v", hit, out, cv)
	}
}
