package porcupine

import (
	"math/rand/v2"
	"testing"

	"github.com/f91dcac0/tributary/model"
)

// TestImpossibleIsSound checks the Step fast path: on random states, it
// never rules out the output the model actually gives, and it does rule
// out some outputs the model does not give (so the test can fail either
// way: a wrong fast path, or a fast path that never fires).
func TestImpossibleIsSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	ruledOut, settled := 0, 0
	for seq := 0; seq < 200; seq++ {
		b, _ := model.New(int32(1 + rng.IntN(3)))
		b.Create("t", 3)
		for i := 0; i < 100; i++ {
			in := randomCall(rng, b)
			want := Apply(b.Clone(), in)
			if (in.Kind == KindAck || in.Kind == KindRetry) && want.OK {
				settled++
			}
			if impossible(b, in, want) {
				t.Fatalf("state\n%v\ncall %v: impossible rules out the model's own output %+v", b, in, want)
			}
			wrong := want
			switch {
			case in.Kind == KindPublish && !want.Invalid:
				wrong.Offset = want.Offset + 1
			case (in.Kind == KindAck || in.Kind == KindRetry) && !want.Invalid && !want.OK:
				wrong.OK = true
			case in.Kind == KindPoll && !want.Invalid && len(want.Records) > 0:
				wrong.Records = append([]Record(nil), want.Records...)
				wrong.Records[0].Offset--
			}
			if impossible(b, in, wrong) {
				ruledOut++
			}
			Apply(b, in)
		}
	}
	if ruledOut == 0 || settled == 0 {
		t.Fatalf("impossible ruled out %d wrong outputs, %d acks or retries succeeded; want some of both", ruledOut, settled)
	}
	t.Logf("ruled out %d wrong outputs; %d acks or retries succeeded", ruledOut, settled)
}

// randomCall returns a call on topic t, valid or not, aimed at deliveries
// often enough that acks succeed.
func randomCall(rng *rand.Rand, b *model.Broker) Input {
	group := []string{"g0", "g1", "bad.g"}[rng.IntN(3)]
	member := []string{"m0", "m1", "m2"}[rng.IntN(3)]
	topic := []string{"t", "t", "t", "t", "u"}[rng.IntN(5)]
	p := rng.Int32N(4) - rng.Int32N(2)
	switch rng.IntN(7) {
	case 0:
		return Input{Kind: KindJoin, Topic: topic, Group: group, Member: member}
	case 1:
		return Input{Kind: KindLeave, Topic: topic, Group: group, Member: member}
	case 2, 3:
		return Input{Kind: KindPublish, Topic: topic, Partition: p, Payload: "x"}
	case 4:
		return Input{Kind: KindPoll, Topic: topic, Group: group, Member: member, N: rng.Int32N(4)}
	default:
		off := rng.Int64N(5) - 1
		for q := int32(0); q < 3 && rng.IntN(4) > 0; q++ { // aim at a delivery in flight
			if f, err := b.InFlight(topic, group, q); err == nil && f {
				p = q
				off, _ = b.Committed(topic, group, q)
				break
			}
		}
		kind := KindAck
		if rng.IntN(2) == 0 {
			kind = KindRetry
		}
		return Input{Kind: kind, Topic: topic, Group: group, Member: member, Partition: p, Offset: off}
	}
}
