//go:build !tributary_faults

package ringlog

import "sync/atomic"

// hooks is empty in a normal build, and each of its methods is the log's
// own step: filling does nothing and firstKept returns its first argument.
// Each inlines to nothing, so the log compiles as if the seam were not
// there. faults.go says where each seam is and what its broken variant
// does.
type hooks[T any] struct{}

// filling runs before install copies the pages in use into grown, which
// is published once filled: nothing.
func (hooks[T]) filling(*atomic.Pointer[directory[T]], *directory[T]) {}

// firstKept returns last, the first page TrimTo keeps when it trims to
// off on a log whose end offset is end.
func (hooks[T]) firstKept(last, _, _ int64) int64 { return last }
