package tributary_test

import (
	"encoding/json"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/engine"
)

// treeNode's UnmarshalJSON links each child back to its receiver, as
// decoders of trees do: the receiver's address is kept in the value.
type treeNode struct {
	Name   string      `json:"name"`
	Kids   []*treeNode `json:"kids"`
	Parent *treeNode   `json:"-"`
}

func (n *treeNode) UnmarshalJSON(b []byte) error {
	type plain treeNode
	if err := json.Unmarshal(b, (*plain)(n)); err != nil {
		return err
	}
	for _, k := range n.Kids {
		k.Parent = n
	}
	return nil
}

// TestJSONUnmarshalerKeepsItsReceiver: a message a Messages loop yielded
// is the caller's even when its type's UnmarshalJSON kept its receiver's
// address: the next step's poll, into the loop's own batch, must not
// rewrite what that address holds (the JSON codec decodes such types into
// a value of their own, not into the batch's slot).
func TestJSONUnmarshalerKeepsItsReceiver(t *testing.T) {
	c := testCluster(t, 10)
	tp := testTopic(t, c, "t", 1, tributary.JSON[treeNode]())
	publishRaw(t, c, "t", 0, engine.Message{Payload: `{"name":"a","kids":[{"name":"a1"}]}`})
	publishRaw(t, c, "t", 0, engine.Message{Payload: `{"name":"b","kids":[{"name":"b1"}]}`})
	cons := testConsumer(t, tp, "g", "c", tributary.WithBatch(1))
	var kept []tributary.Message[treeNode]
	for m, err := range cons.Messages(guardCtx(t)) {
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, m)
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		if len(kept) == 2 {
			break
		}
	}
	for _, m := range kept {
		if p := m.Value.Kids[0].Parent; p.Name != m.Value.Name {
			t.Errorf("message %q: its child's parent is now %q", m.Value.Name, p.Name)
		}
	}
}
