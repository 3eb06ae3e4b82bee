package jetstream

import (
	"encoding/json"
	"testing"
)

// TestMultiLast: a snapshot read's request is the bytes json.Marshal
// gives, for keys and patterns of identifiers and for keys with every
// character json.Marshal escapes, in one allocation besides the state
// subject prefix.
func TestMultiLast(t *testing.T) {
	b := &Backend{sp: "trib"}
	for _, keys := range [][]string{
		{},
		{"group.t.g"},
		{"group.t.g", "cursor.t.g.0", "low.t.0", "cursor.t.g.*", "low.t.*"},
		{"q\"uote", "back\\slash", "<tag>", "a&b", "ctl\x01", "\x7f", "é", "bad\xff", "\u2028"},
	} {
		subjects := make([]string, len(keys))
		for i, k := range keys {
			subjects[i] = b.stateSubject(k)
		}
		want, err := json.Marshal(struct {
			MultiLast []string `json:"multi_last"`
		}{subjects})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.multiLast(keys); string(got) != string(want) {
			t.Errorf("multiLast(%q) = %s, want %s", keys, got, want)
		}
	}
	keys := []string{"group.t.g", "cursor.t.g.0", "low.t.0"}
	if n := testing.AllocsPerRun(100, func() { b.multiLast(keys) }); n > 2 {
		t.Errorf("multiLast allocates %v times, want at most 2", n)
	}
}
