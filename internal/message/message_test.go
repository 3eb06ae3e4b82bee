package message_test

import (
	"testing"

	"github.com/f91dcac0/tributary/internal/message"
)

type header struct{ Key, Value string }

// TestSize checks that every byte of the key, the payload and each
// header's key and value counts, and nothing else.
func TestSize(t *testing.T) {
	tests := []struct {
		key, payload string
		headers      []header
		wsize        int
	}{
		{"", "", nil, 0},
		{"k", "", nil, 1},
		{"", "payload", nil, 7},
		{"", "", []header{{"a", "bc"}}, 3},
		{"key", "pay", []header{{"h1", "v"}, {"", "vv"}, {"h3", ""}}, 3 + 3 + 3 + 2 + 2},
		{"é", "", nil, 2}, // bytes, not runes
	}
	for _, tt := range tests {
		if got := message.Size(tt.key, tt.payload, tt.headers); got != tt.wsize {
			t.Errorf("Size(%q, %q, %v) = %d, want %d", tt.key, tt.payload, tt.headers, got, tt.wsize)
		}
	}
}

// TestCloneHeaders checks that the copy is nil for no headers and shares
// no memory with its source otherwise.
func TestCloneHeaders(t *testing.T) {
	if got := message.CloneHeaders([]header{}); got != nil {
		t.Errorf("CloneHeaders(empty) = %#v, want nil", got)
	}
	if got := message.CloneHeaders[header](nil); got != nil {
		t.Errorf("CloneHeaders(nil) = %#v, want nil", got)
	}
	src := []header{{"a", "1"}, {"b", "2"}}
	got := message.CloneHeaders(src)
	src[0].Key = "changed"
	if len(got) != 2 || got[0] != (header{"a", "1"}) || got[1] != (header{"b", "2"}) {
		t.Errorf("CloneHeaders = %v, want [{a 1} {b 2}], unchanged by its source", got)
	}
	if n := testing.AllocsPerRun(100, func() { message.CloneHeaders([]header(nil)) }); n != 0 {
		t.Errorf("CloneHeaders(nil) allocates %v times, want 0", n)
	}
}
