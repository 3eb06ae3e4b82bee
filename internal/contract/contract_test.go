package contract_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/internal/contract"
)

var errInvalid = errors.New("invalid")

// TestLimits checks that the bounds the checks apply are the ones the
// engine publishes.
func TestLimits(t *testing.T) {
	if contract.MaxIDLength != engine.MaxIDLength || contract.MaxPartitionCount != engine.MaxPartitionCount {
		t.Fatalf("contract: MaxIDLength %d, MaxPartitionCount %d; engine: %d, %d",
			contract.MaxIDLength, contract.MaxPartitionCount, engine.MaxIDLength, engine.MaxPartitionCount)
	}
}

// TestCheck checks SPEC rule 3 at its bounds and the error text.
func TestCheck(t *testing.T) {
	long := strings.Repeat("a", contract.MaxIDLength)
	tests := []struct {
		id   string
		wmsg string // "" for a valid id
	}{
		{"a", ""},
		{"A-z_09", ""},
		{long, ""},
		{"", `invalid: topic identifier "": length 0 outside [1,64]`},
		{long + "b", `invalid: topic identifier "` + long + `"…: length 65 outside [1,64]`},
		{"a.b", `invalid: topic identifier "a.b": byte 1 (0x2e) is not one of A-Z a-z 0-9 _ -`},
		{"é", `invalid: topic identifier "é": byte 0 (0xc3) is not one of A-Z a-z 0-9 _ -`},
	}
	for _, tt := range tests {
		err := contract.CheckID(errInvalid, "topic", tt.id)
		if tt.wmsg == "" {
			if err != nil {
				t.Errorf("CheckID(%q) = %v, want nil", tt.id, err)
			}
			continue
		}
		if !errors.Is(err, errInvalid) || err.Error() != tt.wmsg {
			t.Errorf("CheckID(%q) = %v, want %s wrapping the sentinel", tt.id, err, tt.wmsg)
		}
	}
}

// TestCheckGroupMember checks that the group is checked first.
func TestCheckGroupMember(t *testing.T) {
	err := contract.CheckGroupMember(errInvalid, "", "")
	if err == nil || !strings.Contains(err.Error(), "group identifier") {
		t.Fatalf("CheckGroupMember(\"\", \"\") = %v, want the group's error", err)
	}
	err = contract.CheckGroupMember(errInvalid, "g", "m!")
	if err == nil || !strings.Contains(err.Error(), "member identifier") {
		t.Fatalf("CheckGroupMember(g, m!) = %v, want the member's error", err)
	}
	if err := contract.CheckGroupMember(errInvalid, "g", "m"); err != nil {
		t.Fatalf("CheckGroupMember(g, m) = %v, want nil", err)
	}
}

// TestCheckCreate checks that the topic is checked before the count, and
// the count's bounds.
func TestCheckCreate(t *testing.T) {
	if err := contract.CheckCreate(errInvalid, "t!", 0); err == nil || !strings.Contains(err.Error(), "topic identifier") {
		t.Errorf("CheckCreate(t!, 0) = %v, want the identifier's error", err)
	}
	for _, n := range []int32{0, -1, contract.MaxPartitionCount + 1} {
		err := contract.CheckCreate(errInvalid, "t", n)
		if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "partition count") {
			t.Errorf("CheckCreate(t, %d) = %v, want the count's error", n, err)
		}
	}
	for _, n := range []int32{1, contract.MaxPartitionCount} {
		if err := contract.CheckCreate(errInvalid, "t", n); err != nil {
			t.Errorf("CheckCreate(t, %d) = %v, want nil", n, err)
		}
	}
}

// TestPolled checks that only a nil result without error becomes empty.
func TestPolled(t *testing.T) {
	if out, err := contract.Polled[int](nil, nil); out == nil || len(out) != 0 || err != nil {
		t.Errorf("Polled(nil, nil) = %#v, %v, want [], nil", out, err)
	}
	if out, err := contract.Polled[int](nil, errInvalid); out != nil || err != errInvalid {
		t.Errorf("Polled(nil, err) = %#v, %v, want nil, err", out, err)
	}
	if out, _ := contract.Polled([]int{7}, nil); len(out) != 1 || out[0] != 7 {
		t.Errorf("Polled([7], nil) = %v, want [7]", out)
	}
}
