package tributary_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine/assign"
)

// The worked examples of docs/extending.md: a toy assignor and a toy
// codec, each with the checks the project applies to its own.

// reverseRoundRobin deals the partitions round-robin from the last member
// in name order: partition p goes to members[n-1-p%n].
type reverseRoundRobin struct{}

func (reverseRoundRobin) Name() string { return "ReverseRoundRobin" }

func (reverseRoundRobin) Assign(members, previous []string) []string {
	owner := make([]string, len(previous)) // a new slice: the caller's
	for p := range owner {
		owner[p] = members[len(members)-1-p%len(members)]
	}
	return owner
}

// hex32 carries a uint32 as exactly 8 lower-case hexadecimal digits, so
// payloads sort as their values do: 42 is "0000002a".
type hex32 struct{}

func (hex32) Name() string { return "Hex32" }

func (hex32) Encode(v uint32) (string, error) { return fmt.Sprintf("%08x", v), nil }

func (hex32) Decode(payload string) (uint32, error) {
	if len(payload) != 8 || strings.ToLower(payload) != payload {
		return 0, fmt.Errorf("Hex32: decode payload %q: want 8 lower-case hex digits", payload)
	}
	v, err := strconv.ParseUint(payload, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("Hex32: decode payload %q: %w", payload, err)
	}
	return uint32(v), nil
}

func ExampleAssignor_reverseRoundRobin() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	orders, _ := tributary.CreateTopic(c, "orders", 5, tributary.String())
	c.CreateGroup("orders", "billing", reverseRoundRobin{})
	a, _ := tributary.NewConsumer(orders, "billing", "a")
	b, _ := tributary.NewConsumer(orders, "billing", "b") // joins: a rebalance
	fmt.Println("a", a.Assignment(), "b", b.Assignment())
	d, _ := c.Describe("orders")
	fmt.Println(d.Groups[0].Assignor)
	// Output:
	// a [1 3] b [0 2 4]
	// ReverseRoundRobin
}

func ExampleCodec_hex32() {
	c, _ := tributary.NewCluster(100)
	defer c.Close()
	readings, _ := tributary.CreateTopic[uint32](c, "readings", 1, hex32{})
	p, _ := tributary.NewProducer[uint32](c, "sensor", tributary.RoundRobin())
	cons, _ := tributary.NewConsumer(readings, "store", "store-1")
	p.Send(context.Background(), readings, tributary.Message[uint32]{Value: 42})
	ms, _ := cons.Poll(context.Background(), 1)
	fmt.Println(ms[0].Value, ms[0].PayloadType)
	s, _ := c.Backend().Snapshot("readings") // the payload as the broker keeps it
	fmt.Printf("%q\n", s.Records[0][0].Payload)
	// Output:
	// 42 Hex32
	// "0000002a"
}

// TestReverseRoundRobin runs the assignor checks on the toy assignor
// (backendtest.CheckAssignor: the answers the broker accepts, purity,
// determinism) and checks its answers on a table.
func TestReverseRoundRobin(t *testing.T) {
	backendtest.CheckAssignor(t, reverseRoundRobin{})
	for _, tt := range []struct {
		members []string
		parts   int
		wowner  []string
	}{
		{[]string{"a"}, 3, []string{"a", "a", "a"}},
		{[]string{"a", "b"}, 5, []string{"b", "a", "b", "a", "b"}},
		{[]string{"a", "b", "c"}, 2, []string{"c", "b"}},
	} {
		owner, err := assign.Run(reverseRoundRobin{}, tt.members, make([]string, tt.parts))
		if err != nil || !slices.Equal(owner, tt.wowner) {
			t.Errorf("members %q, %d partitions: %q, %v; want %q", tt.members, tt.parts, owner, err, tt.wowner)
		}
	}
}

// TestHex32 runs the codec checks on the toy codec (backendtest.CheckCodec:
// round trips, refused payloads, concurrent use) and checks its payloads.
func TestHex32(t *testing.T) {
	backendtest.CheckCodec(t, hex32{}, []uint32{0, 1, 42, 0xdeadbeef, 1<<32 - 1},
		[]string{"", "2a", "0000002A", "0000002g", "+000002a", "-000002a", "00000002a", " 000002a"})
	for v, wpayload := range map[uint32]string{0: "00000000", 42: "0000002a", 1<<32 - 1: "ffffffff"} {
		if p, err := (hex32{}).Encode(v); err != nil || p != wpayload {
			t.Errorf("Encode(%d) = %q, %v; want %q", v, p, err, wpayload)
		}
	}
}

// FuzzHex32 decodes any payload: no panic, the zero value and the codec's
// name on error, a round trip on success; and, for a payload that
// decodes, canonical form (Encode gives the payload back).
func FuzzHex32(f *testing.F) {
	for _, s := range []string{"", "0000002a", "ffffffff", "FFFFFFFF", "0x00002a", "-0000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		if backendtest.CheckCodecPayload(t, hex32{}, payload) {
			v, _ := hex32{}.Decode(payload)
			if p, _ := (hex32{}).Encode(v); p != payload {
				t.Errorf("Encode(Decode(%q)) = %q", payload, p)
			}
		}
	})
}

// TestBuiltinsPassTheChecks: the checks a user's codec and assignor are
// given hold for the built-in ones.
func TestBuiltinsPassTheChecks(t *testing.T) {
	backendtest.CheckCodec(t, tributary.String(), []string{"", "x", "a\xffb"}, nil)
	backendtest.CheckCodec(t, tributary.Bytes(), [][]byte{{}, []byte("x")}, nil)
	backendtest.CheckCodec(t, tributary.Integer[int8](), []int8{0, -128, 127}, []string{"", "128", "-0", "007", "+1"})
	backendtest.CheckCodec(t, tributary.JSON[order](), []order{{ID: 7, Item: "tea", Notes: []string{"ü"}}},
		[]string{"", "{", `{"id":1} {}`, `{"id":"x"}`})
	for _, a := range []tributary.Assignor{tributary.RoundRobinAssignor, tributary.RangeAssignor, tributary.StickyAssignor} {
		backendtest.CheckAssignor(t, a)
	}
}

// TestExtendingQuotesRealCode: every line of every Go block of
// docs/extending.md is a line of the module's code (this file, the
// interfaces it names, backendtest, the program), so the doc's interfaces,
// signatures and worked examples are the compiled ones.
func TestExtendingQuotesRealCode(t *testing.T) {
	doc, err := os.ReadFile("docs/extending.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, pattern := range []string{"*.go", "engine/assign/*.go", "backendtest/*.go", "cmd/tributary/*.go"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v, %v", pattern, files, err)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(src), "\n") {
				lines[strings.TrimSpace(l)] = true
			}
		}
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 6 {
		t.Fatalf("docs/extending.md has %d Go blocks, want the interfaces and both worked examples", len(blocks))
	}
	for _, b := range blocks {
		for _, l := range strings.Split(b[1], "\n") {
			if l = strings.TrimSpace(l); l != "" && !lines[l] {
				t.Errorf("docs/extending.md quotes a line that is in no source file: %q", l)
			}
		}
	}
}
