package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/f91dcac0/tributary"
)

// TestErrorClassesAreTheLibrarys: an unknown id is tributary.ErrNotFound,
// a duplicate id tributary.ErrExists and a type mismatch
// tributary.ErrTypeMismatch (errors.Is), while the line printed keeps the
// program's words.
func TestErrorClassesAreTheLibrarys(t *testing.T) {
	s, err := newSession(&bytes.Buffer{}, osReader("."), sessionFlags{capacity: 10, window: 10, now: time.Now, seed: -1, backend: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, line := range []string{"create topic orders String", "create producer p Integer Manual"} {
		if err := s.exec(line); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	for _, tt := range []struct {
		line       string
		class, lib error
		wmsg       string
	}{
		{"consume event nope p0", errUnknownID, tributary.ErrNotFound, `unknown consumer "nope" (consumers: none)`},
		{"create topic orders String", errDuplicateID, tributary.ErrExists, `topic "orders" already exists`},
		{"create producer p Integer Manual", errDuplicateID, tributary.ErrExists, `producer "p" already exists`},
		{"produce event p orders x.json 0", errTypeMismatch, tributary.ErrTypeMismatch,
			`type mismatch: producer "p" makes Integer events; topic "orders" holds String`},
	} {
		err := s.exec(tt.line)
		if !errors.Is(err, tt.class) || !errors.Is(err, tt.lib) {
			t.Errorf("%s: %v; want errors.Is %v and %v", tt.line, err, tt.class, tt.lib)
		}
		if err != nil && errText(err) != tt.wmsg {
			t.Errorf("%s: printed %q, want %q", tt.line, errText(err), tt.wmsg)
		}
	}
}
