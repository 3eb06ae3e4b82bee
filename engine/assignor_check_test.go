package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/engine"
)

type typedAssignor struct{ name string }

func (a *typedAssignor) Name() string { return a.name }
func (a *typedAssignor) Assign(members, previous []string) []string {
	return engine.RoundRobin.Assign(members, previous)
}

type nameBoom struct{}

func (nameBoom) Name() string { panic("name boom") }
func (nameBoom) Assign(members, previous []string) []string {
	return engine.RoundRobin.Assign(members, previous)
}

// TestAssignorRefusedAtTheDoor: a typed-nil Assignor is a nil Assignor
// (ErrInvalidArgument), and one whose Name panics is refused with
// ErrInvalidAssignment by CreateGroup and SetAssignor, changing nothing, so
// that Describe never calls a user's Name.
func TestAssignorRefusedAtTheDoor(t *testing.T) {
	b, err := engine.New(4)
	require.NoError(t, err)
	_, err = b.Create("t", 2)
	require.NoError(t, err)
	_, err = b.Join("t", "g", "m")
	require.NoError(t, err)
	before, err := b.Describe("t")
	require.NoError(t, err)

	var typedNil *typedAssignor
	for _, a := range []engine.Assignor{typedNil, nil} {
		ok, err := b.CreateGroup("t", "h", a)
		require.ErrorIs(t, err, engine.ErrInvalidArgument)
		require.False(t, ok)
		ok, err = b.SetAssignor("t", "g", a)
		require.ErrorIs(t, err, engine.ErrInvalidArgument)
		require.False(t, ok)
	}
	ok, err := b.CreateGroup("t", "h", nameBoom{})
	require.ErrorIs(t, err, engine.ErrInvalidAssignment)
	require.NotErrorIs(t, err, engine.ErrInvalidArgument)
	require.False(t, ok)
	ok, err = b.SetAssignor("t", "g", nameBoom{})
	require.ErrorIs(t, err, engine.ErrInvalidAssignment)
	require.False(t, ok)

	after, err := b.Describe("t")
	require.NoError(t, err)
	require.Equal(t, before, after)

	ok, err = b.SetAssignor("t", "g", &typedAssignor{name: "mine"})
	require.NoError(t, err)
	require.True(t, ok)
	d, err := b.Describe("t")
	require.NoError(t, err)
	require.Equal(t, "mine", d.Groups[0].Assignor)
}

// TestAddPartitionsAtTheLimitSaysSo: the error names the limit.
func TestAddPartitionsAtTheLimitSaysSo(t *testing.T) {
	b, err := engine.New(4)
	require.NoError(t, err)
	_, err = b.Create("t", engine.MaxPartitionCount)
	require.NoError(t, err)
	_, err = b.AddPartitions("t", 1)
	require.ErrorIs(t, err, engine.ErrInvalidArgument)
	require.Contains(t, err.Error(), "already has the most partitions, 64")
}
