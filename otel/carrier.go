package tribotel

import (
	"go.opentelemetry.io/otel/propagation"

	"github.com/f91dcac0/tributary"
)

// HeaderCarrier adapts a record's headers to propagation.TextMapCarrier:
// Get returns the value of the first header of the key (keys compare
// exactly, as the propagators write them in lower case), Set replaces the
// value of the first header of the key, or appends one, and Keys lists
// the keys in order. For a message handled without Run (Poll):
//
//	ctx = prop.Extract(ctx, (*tribotel.HeaderCarrier)(&m.Headers))
//
// and before sending without the hooks, Inject the same way.
type HeaderCarrier []tributary.Header

var _ propagation.TextMapCarrier = (*HeaderCarrier)(nil)

// Get returns the value of the first header named key, "" when none.
func (c *HeaderCarrier) Get(key string) string {
	for _, h := range *c {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// Set sets the first header named key to value, appending a header when
// there is none. It changes the elements of the slice in place: set only
// headers that are yours to change.
func (c *HeaderCarrier) Set(key, value string) {
	for j := range *c {
		if (*c)[j].Key == key {
			(*c)[j].Value = value
			return
		}
	}
	*c = append(*c, tributary.Header{Key: key, Value: value})
}

// Keys returns the headers' keys in order, in a new slice.
func (c *HeaderCarrier) Keys() []string {
	keys := make([]string, len(*c))
	for j, h := range *c {
		keys[j] = h.Key
	}
	return keys
}
