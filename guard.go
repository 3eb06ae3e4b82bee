package tributary

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime/debug"
)

// User code the library calls — a Codec's Name, Encode and Decode, a
// Partitioner's Name and Partition, a Handler, the Error method of an
// error a handler or Nack's caller gives — runs behind the guards of this
// file: a panic there becomes an error of the call that ran it (wrapping
// the sentinel its doc names), never a crash of the process, and the
// library's state is as if the call had failed before it changed anything.

// panicError is a panic of user code, recovered: what panicked, the value
// it panicked with and the stack of the goroutine it panicked on.
type panicError struct {
	what  string // e.g. `codec "JSON:main.Order": Encode`
	value any    // recover()'s answer
	stack []byte // debug.Stack() at the recover
}

func newPanicError(what string, value any) *panicError {
	return &panicError{what: what, value: value, stack: panicStack(debug.Stack())}
}

// panicStack returns the stack debug.Stack gave in a deferred recover,
// less the frames of the recover itself: the goroutine's header line, then
// the frames from the one that panicked down. A stack without a panic
// frame is returned whole.
func panicStack(stack []byte) []byte {
	header, rest, ok := bytes.Cut(stack, []byte("\n"))
	if !ok {
		return stack
	}
	// Each frame is two lines: the function, then "\tfile:line +0x…".
	i := bytes.Index(rest, []byte("\npanic("))
	if i < 0 && !bytes.HasPrefix(rest, []byte("panic(")) {
		return stack
	}
	frames := rest[i+1:]
	for range 2 { // the panic frame's two lines
		if _, frames, ok = bytes.Cut(frames, []byte("\n")); !ok {
			return stack
		}
	}
	return append(append(header, '\n'), frames...)
}

// Error is "<what> panicked: <value>" then, on the next lines, the stack.
// fmt formats the value, so a value whose own Error or String method
// panics still gives a text (fmt reports that panic in it).
func (e *panicError) Error() string {
	return fmt.Sprintf("%s panicked: %v\n%s", e.what, e.value, e.stack)
}

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through a panic(err).
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, func or channel. A Codec or Partitioner given as such a
// typed nil is refused as nil: calling its methods would most likely
// panic (engine/assign.IsNil is the same rule for assignors).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// errorText returns err.Error(), or, when that panics (a typed nil whose
// Error dereferences its receiver, say), a fixed text naming err's type.
// Every user error whose text the library writes (a dead letter's
// HeaderDeadLetterError, an error message) goes through it.
func errorText(err error) (text string) {
	defer func() {
		if recover() != nil {
			text = fmt.Sprintf("%T with a panicking Error method", err)
		}
	}()
	return err.Error()
}

// userName returns name(), the Name of a user's Codec or Partitioner, or
// an error wrapping ErrInvalidArgument when it panics.
func userName(what string, name func() string) (n string, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = "", fmt.Errorf("%w: %w", ErrInvalidArgument, newPanicError(what+": Name", p))
		}
	}()
	return name(), nil
}

// encode is codec.Encode(v) with a panic turned into an error (which the
// caller's error names the codec around).
func encode[T any](codec Codec[T], v T) (payload string, err error) {
	defer func() {
		if p := recover(); p != nil {
			payload, err = "", newPanicError("Encode", p)
		}
	}()
	return codec.Encode(v)
}

// decode is codec.Decode(payload) with a panic turned into an error; on
// error the value is T's zero value.
func decode[T any](codec Codec[T], pt, payload string) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, newPanicError(fmt.Sprintf("codec %q: Decode", pt), p)
		}
	}()
	v, err = codec.Decode(payload)
	if err != nil {
		var zero T
		v = zero
	}
	return v, err
}

// decodeInto is d.decodeInto(payload, v) with a panic turned into an
// error; on error *v is T's zero value.
func decodeInto[T any](d decoderInto[T], pt, payload string, v *T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = newPanicError(fmt.Sprintf("codec %q: Decode", pt), p)
		}
		if err != nil {
			var zero T
			*v = zero
		}
	}()
	return d.decodeInto(payload, v)
}

// partition is part.Partition(key, partition, partitions) with a panic
// turned into an error (which the caller's error names the partitioner
// around).
func partition(part Partitioner, key string, p, partitions int32) (n int32, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = -1, newPanicError("Partition", r)
		}
	}()
	return part.Partition(key, p, partitions)
}

// checkCluster refuses a nil *Cluster, or one not made by NewCluster or
// NewClusterOn (a zero Cluster has no backend).
func checkCluster(c *Cluster) error {
	if c == nil || c.backend == nil {
		return fmt.Errorf("%w: nil Cluster (make one with NewCluster or NewClusterOn)", ErrInvalidArgument)
	}
	return nil
}

// checkTopic refuses a nil *Topic, or one not made by CreateTopic or
// OpenTopic.
func checkTopic[T any](t *Topic[T]) error {
	if t == nil || t.bt == nil {
		return fmt.Errorf("%w: nil Topic (get one from CreateTopic or OpenTopic)", ErrInvalidArgument)
	}
	return nil
}

// topicCodec resolves the codec argument of CreateTopic and OpenTopic: nil
// is JSON[T](); a typed nil, or a codec whose Name panics, is
// ErrInvalidArgument. It returns the codec and its Name, read once.
func topicCodec[T any](codec Codec[T]) (Codec[T], string, error) {
	if codec == nil {
		codec = JSON[T]()
	} else if isNil(codec) {
		return nil, "", fmt.Errorf("%w: nil %T Codec (pass nil itself for JSON)", ErrInvalidArgument, codec)
	}
	pt, err := userName(fmt.Sprintf("codec %T", codec), codec.Name)
	if err != nil {
		return nil, "", err
	}
	return codec, pt, nil
}
