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

// TestGroupCacheDecodesAsJSON: a group value read through the cache, on
// its first read (a miss) and its later ones (hits), is what
// encoding/json decodes, nil and empty lists and maps told apart.
func TestGroupCacheDecodesAsJSON(t *testing.T) {
	var c groupCache
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

// TestGroupCacheCopies: what one read of a cached group returns is its
// own: changing its lists and map (in place and by append) changes
// neither the cache nor another read's copy. The concurrent part is for
// -race: readers changing their copies of one cached value at once.
func TestGroupCacheCopies(t *testing.T) {
	var c groupCache
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

// TestGroupCacheBound: the cache holds at most groupCacheSize keys, and
// a key it dropped decodes again.
func TestGroupCacheBound(t *testing.T) {
	var c groupCache
	data := []byte(groupValues[3])
	for i := range 3 * groupCacheSize {
		var gv groupVal
		if err := c.decode(groupKey("t", "g"+strconv.Itoa(i)), data, &gv); err != nil {
			t.Fatal(err)
		}
		if n := len(c.vals); n > groupCacheSize {
			t.Fatalf("%d keys cached after %d reads, bound %d", n, i+1, groupCacheSize)
		}
		if gv.Gen != 3 {
			t.Fatalf("read %d: gen %d, want 3", i, gv.Gen)
		}
	}
}

// TestGroupCacheAllocs: a read of a cached 16-partition group allocates
// its copy only (the value, which escapes as readGroupIn's does, its
// lists and its map: 5), where decoding it with encoding/json allocates
// many times that. Counts, not timings.
func TestGroupCacheAllocs(t *testing.T) {
	gv := groupVal{Gen: 5, Assignor: "roundrobin", Members: []string{"c1", "c2"}, Incs: map[string]string{"c1": "0123456789abcdef", "c2": "fedcba9876543210"}}
	for p := range 16 {
		gv.Owners = append(gv.Owners, gv.Members[p%2])
		gv.Since = append(gv.Since, 5)
	}
	data, err := json.Marshal(gv)
	if err != nil {
		t.Fatal(err)
	}
	var c groupCache
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
