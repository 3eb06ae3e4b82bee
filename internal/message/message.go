// Package message holds the two pure helpers on a message that package
// engine and the reference model (package model) share: its size, which
// WithMaxMessageBytes bounds (SPEC rule 15), and the copy of its headers.
// They are arithmetic on a message's fields, not a step of the broker's
// algorithm, so the model stays an independent statement of the broker
// while stating them once with the engine. The package imports neither.
package message

// header is engine.Header or model.Header: a key and a value.
type header interface{ ~struct{ Key, Value string } }

// Size is the size of a message that WithMaxMessageBytes bounds, in bytes:
// the lengths of its key, its payload and each header's key and value.
func Size[H header](key, payload string, headers []H) int {
	n := len(key) + len(payload)
	for _, h := range headers {
		kv := struct{ Key, Value string }(h)
		n += len(kv.Key) + len(kv.Value)
	}
	return n
}

// CloneHeaders returns a copy of h, owned by the caller, or nil (no
// allocation) when h is empty.
func CloneHeaders[H header](h []H) []H {
	if len(h) == 0 {
		return nil
	}
	return append([]H(nil), h...)
}
