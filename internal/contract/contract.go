// Package contract holds the parts of the core contract (SPEC rules 2 and
// 3, and Poll's result) that package engine and the benchmarks' RWMutex
// engine (bench/internal/rwengine) state alike, so that both reject the
// same arguments with the same error text. It is pure: no state, no I/O.
package contract

import (
	"fmt"
	"strconv"
)

const (
	MaxIDLength       = 64 // longest topic, group or member identifier, in bytes (SPEC rule 3)
	MaxPartitionCount = 64 // largest partition count of a topic (SPEC rule 2; smallest: 1)
)

// idByte marks the bytes allowed in identifiers: A-Z a-z 0-9 _ - (SPEC rule 3).
var idByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	t['_'], t['-'] = true, true
	return t
}()

// CheckID returns an error wrapping invalid (the caller's
// ErrInvalidArgument) unless id is 1..MaxIDLength bytes of
// A-Z a-z 0-9 _ -; kind ("topic", "group", "member") names the identifier
// in the error, which quotes at most MaxIDLength bytes of id. It allocates
// only for an invalid id.
func CheckID(invalid error, kind, id string) error {
	if len(id) == 0 || len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s identifier %s: length %d outside [1,%d]", invalid, kind, quote(id), len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return fmt.Errorf("%w: %s identifier %s: byte %d (0x%02x) is not one of A-Z a-z 0-9 _ -", invalid, kind, quote(id), i, id[i])
		}
	}
	return nil
}

// CheckCreate returns an error wrapping invalid for the first of Create's
// arguments outside the contract: topicName not an identifier (CheckID),
// or partitionCount outside 1..MaxPartitionCount.
func CheckCreate(invalid error, topicName string, partitionCount int32) error {
	if err := CheckID(invalid, "topic", topicName); err != nil {
		return err
	}
	if partitionCount < 1 || partitionCount > MaxPartitionCount {
		return fmt.Errorf("%w: topic %q: partition count %d outside [1,%d]", invalid, topicName, partitionCount, MaxPartitionCount)
	}
	return nil
}

// Polled is Poll's result from that of AppendPoll into a nil buffer: out,
// or an empty, non-nil slice (which allocates nothing) when there is no
// record and no error.
func Polled[R any](out []R, err error) ([]R, error) {
	if out == nil && err == nil {
		out = []R{}
	}
	return out, err
}

// CheckGroupMember returns CheckID's first error of the group and member
// identifiers, in that order, or nil.
func CheckGroupMember(invalid error, groupName, member string) error {
	if err := CheckID(invalid, "group", groupName); err != nil {
		return err
	}
	return CheckID(invalid, "member", member)
}

// quote is id Go-quoted for an error message, its first MaxIDLength bytes
// only, then "…" when it is longer: an invalid identifier may be of any
// size, and an error names it without echoing all of it.
func quote(id string) string {
	if len(id) <= MaxIDLength {
		return strconv.Quote(id)
	}
	return strconv.Quote(id[:MaxIDLength]) + "…"
}
