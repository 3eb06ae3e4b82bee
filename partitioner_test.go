package tributary_test

// The partitioners: Kafka's murmur2 vectors and allocations, KeyHash,
// RoundRobin, Random and Manual, partitions in range, and their names.

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/f91dcac0/tributary"
)

// Kafka's own test vectors for Utils.murmur2 (UtilsTest.testMurmur2).
var murmur2Vectors = []struct {
	key string
	w   int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
}

func TestMurmur2(t *testing.T) {
	for _, tt := range murmur2Vectors {
		t.Run(tt.key, func(t *testing.T) {
			if got := tributary.Murmur2(tt.key); got != tt.w {
				t.Errorf("Murmur2(%q) = %d, want %d", tt.key, got, tt.w)
			}
		})
	}
}

func TestMurmur2Allocs(t *testing.T) {
	key := "a-little-bit-longer-string"
	var sink int32
	if n := testing.AllocsPerRun(1000, func() { sink = tributary.Murmur2(key) }); n != 0 {
		t.Errorf("Murmur2 allocates %v times per call, want 0", n)
	}
	_ = sink
}

func BenchmarkMurmur2(b *testing.B) {
	for _, n := range []int{8, 64, 1024} {
		key := strings.Repeat("k", n)
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			var sink int32
			for b.Loop() {
				sink += tributary.Murmur2(key)
			}
			_ = sink
		})
	}
}

// TestKeyHashPartition checks key → partition against (h & 0x7fffffff) % n,
// with h from Kafka's vectors, and spells a few results out.
func TestKeyHashPartition(t *testing.T) {
	tests := []struct {
		key        string
		partitions int32
		w          int32
	}{
		// (-973932308 & 0x7fffffff) = 1173551340
		{"21", 1, 0},
		{"21", 3, 0},
		{"21", 7, 1173551340 % 7},
		{"21", 64, 1173551340 % 64},
		// (-790332482 & 0x7fffffff) = 1357151166
		{"foobar", 3, 1357151166 % 3},
		{"foobar", 10, 6},
		{"foobar", 64, 1357151166 % 64},
		// 479470107 is positive
		{"abc", 2, 1},
		{"abc", 10, 7},
		{"abc", 64, 479470107 % 64},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.key, tt.partitions), func(t *testing.T) {
			got, err := tributary.KeyHash().Partition(tt.key, -1, tt.partitions)
			if err != nil || got != tt.w {
				t.Errorf("Partition(%q, %d) = %d, %v; want %d, nil", tt.key, tt.partitions, got, err, tt.w)
			}
		})
	}
	for _, v := range murmur2Vectors {
		for _, n := range []int32{1, 2, 3, 5, 8, 12, 31, 64} {
			got, err := tributary.KeyHash().Partition(v.key, 0, n)
			if w := (v.w & 0x7fffffff) % n; err != nil || got != w {
				t.Errorf("Partition(%q, %d) = %d, %v; want %d, nil", v.key, n, got, err, w)
			}
		}
	}
}

func TestKeyHashSameKey(t *testing.T) {
	p := tributary.KeyHash()
	for _, key := range []string{"user-1", "user-2", "x", "ключ", "\x00"} {
		first, _ := p.Partition(key, 0, 16)
		for range 50 {
			if got, _ := tributary.KeyHash().Partition(key, 3, 16); got != first {
				t.Fatalf("a fresh KeyHash puts %q on %d, the first on %d", key, got, first)
			}
			if got, _ := p.Partition(key, 0, 16); got != first {
				t.Fatalf("KeyHash puts %q on %d, then on %d", key, first, got)
			}
		}
	}
}

func TestKeyHashEmptyKeyRoundRobins(t *testing.T) {
	p := tributary.KeyHash()
	// Keyed messages in between do not advance the no-key counter.
	for i := range 10 {
		if got, _ := p.Partition("", 0, 4); got != int32(i%4) {
			t.Fatalf("call %d with an empty key: partition %d, want %d", i, got, i%4)
		}
		_, _ = p.Partition("some-key", 0, 4)
	}
	// Each KeyHash has a counter of its own.
	if got, _ := tributary.KeyHash().Partition("", 0, 4); got != 0 {
		t.Errorf("a fresh KeyHash's first empty key: partition %d, want 0", got)
	}
}

func TestRoundRobinCycles(t *testing.T) {
	p := tributary.RoundRobin()
	for i := range 25 {
		if got, err := p.Partition("key", 9, 7); err != nil || got != int32(i%7) {
			t.Fatalf("call %d: Partition = %d, %v; want %d, nil", i, got, err, i%7)
		}
	}
	if got, _ := tributary.RoundRobin().Partition("", 0, 7); got != 0 {
		t.Errorf("a fresh RoundRobin's first partition = %d, want 0", got)
	}
}

// TestPartitionConcurrentEven calls a round-robin strategy k*n times from
// many goroutines at once (run with -race) and checks every partition got
// exactly k calls.
func TestPartitionConcurrentEven(t *testing.T) {
	const (
		goroutines = 16
		n          = 12  // partitions
		k          = 500 // calls per partition
	)
	tests := []struct {
		name string
		p    tributary.Partitioner
		key  string
	}{
		{"RoundRobin", tributary.RoundRobin(), "ignored"},
		{"KeyHash empty key", tributary.KeyHash(), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var counts [n]int
			var mu sync.Mutex // guards counts
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					var local [n]int
					for range k * n / goroutines {
						got, err := tt.p.Partition(tt.key, 0, n)
						if err != nil || got < 0 || got >= n {
							t.Errorf("Partition = %d, %v; want [0,%d), nil", got, err, n)
							return
						}
						local[got]++
					}
					mu.Lock()
					for i, c := range local {
						counts[i] += c
					}
					mu.Unlock()
				})
			}
			wg.Wait()
			for i, c := range counts {
				if c != k {
					t.Errorf("partition %d chosen %d times, want %d (all: %v)", i, c, k, counts)
				}
			}
		})
	}
}

func TestRandom(t *testing.T) {
	const (
		n     = 8
		draws = 80_000
	)
	p := tributary.Random()
	var counts [n]int
	for range draws {
		got, err := p.Partition("key", 5, n)
		if err != nil || got < 0 || got >= n {
			t.Fatalf("Partition = %d, %v; want [0,%d), nil", got, err, n)
		}
		counts[got]++
	}
	// Each count is Binomial(80000, 1/8): mean 10000, sd about 94, so
	// ±1000 is over 10 sd; a biased or constant choice fails.
	for i, c := range counts {
		if c < draws/n-1000 || c > draws/n+1000 {
			t.Errorf("partition %d chosen %d times in %d draws, want about %d (all: %v)", i, c, draws, draws/n, counts)
		}
	}
}

// TestRandomSeeded: the same seed gives the same draws, another seed other
// draws, and the draws are uniform like Random's.
func TestRandomSeeded(t *testing.T) {
	const (
		n     = 8
		draws = 80_000
	)
	draw := func(seed uint64, k int) []int32 {
		p := tributary.RandomSeeded(seed)
		if p.Name() != "Random" {
			t.Fatalf("Name = %q, want Random", p.Name())
		}
		out := make([]int32, k)
		for i := range out {
			got, err := p.Partition("", 0, n)
			if err != nil || got < 0 || got >= n {
				t.Fatalf("Partition = %d, %v; want [0,%d), nil", got, err, n)
			}
			out[i] = got
		}
		return out
	}
	a, b, c := draw(7, draws), draw(7, draws), draw(8, 64)
	if !slices.Equal(a, b) {
		t.Fatal("seed 7 gave two different sequences")
	}
	if slices.Equal(a[:64], c) {
		t.Fatal("seeds 7 and 8 gave the same 64 draws")
	}
	var counts [n]int
	for _, p := range a {
		counts[p]++
	}
	for i, k := range counts { // Binomial(80000, 1/8): sd about 94
		if k < draws/n-1000 || k > draws/n+1000 {
			t.Errorf("partition %d chosen %d times in %d draws, want about %d (all: %v)", i, k, draws, draws/n, counts)
		}
	}
	if got, err := tributary.RandomSeeded(1).Partition("", 0, 0); got != -1 || !errors.Is(err, tributary.ErrInvalidArgument) {
		t.Errorf("Partition(partitions 0) = %d, %v; want -1, ErrInvalidArgument", got, err)
	}
}

func TestManual(t *testing.T) {
	p := tributary.Manual()
	for _, tt := range []struct{ partition, partitions int32 }{{0, 1}, {3, 4}, {63, 64}, {-1, 4}, {9, 4}} {
		if got, err := p.Partition("key", tt.partition, tt.partitions); err != nil || got != tt.partition {
			t.Errorf("Partition(key, %d, %d) = %d, %v; want %d, nil (as given)", tt.partition, tt.partitions, got, err, tt.partition)
		}
	}
}

// TestPartitionInRange: every built-in answers in [0, partitions) for
// every partition count 1..64 (Manual given an in-range partition).
func TestPartitionInRange(t *testing.T) {
	tests := []struct {
		name  string
		p     tributary.Partitioner
		wname string
	}{
		{"Manual", tributary.Manual(), "Manual"},
		{"Random", tributary.Random(), "Random"},
		{"RoundRobin", tributary.RoundRobin(), "RoundRobin"},
		{"KeyHash", tributary.KeyHash(), "KeyHash"},
	}
	keys := []string{"", "a", "user-42", "a-little-bit-longer-string", "\xff\xfe"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Name(); got != tt.wname {
				t.Errorf("Name() = %q, want %q", got, tt.wname)
			}
			for n := int32(1); n <= 64; n++ {
				seen := make(map[int32]bool)
				for i := range 3 * n {
					key := keys[int(i)%len(keys)]
					got, err := tt.p.Partition(key, i%n, n)
					if err != nil || got < 0 || got >= n {
						t.Fatalf("Partition(%q, %d, %d) = %d, %v; want [0,%d), nil", key, i%n, n, got, err, n)
					}
					seen[got] = true
				}
				if tt.name != "KeyHash" && tt.name != "Random" && len(seen) != int(n) {
					t.Errorf("partitions %d: %d distinct answers in %d calls, want all %d", n, len(seen), 3*n, n)
				}
			}
		})
	}
}

func TestPartitionNoPartitions(t *testing.T) {
	for _, p := range []tributary.Partitioner{tributary.Random(), tributary.RoundRobin(), tributary.KeyHash()} {
		for _, n := range []int32{0, -1} {
			for _, key := range []string{"", "k"} {
				got, err := p.Partition(key, 0, n)
				if !errors.Is(err, tributary.ErrInvalidArgument) || got != -1 {
					t.Errorf("%s.Partition(%q, 0, %d) = %d, %v; want -1, ErrInvalidArgument", p.Name(), key, n, got, err)
				}
			}
		}
	}
}

// Each built-in partitioner is named by its constructor: the Name() a
// producer reports as its Strategy() is the Go function that made it.
func TestPartitionerNamedByConstructor(t *testing.T) {
	for _, ctor := range []func() tributary.Partitioner{tributary.Manual, tributary.Random, tributary.RoundRobin, tributary.KeyHash} {
		full := runtime.FuncForPC(reflect.ValueOf(ctor).Pointer()).Name()
		fn := full[strings.LastIndexByte(full, '.')+1:]
		if got := ctor().Name(); got != fn {
			t.Errorf("tributary.%s().Name() = %q, want %q", fn, got, fn)
		}
	}
	if got, want := tributary.RandomSeeded(1).Name(), tributary.Random().Name(); got != want {
		t.Errorf("RandomSeeded's Name() = %q, want Random's %q (the same strategy)", got, want)
	}
}

func TestParsePartitioner(t *testing.T) {
	tests := []struct {
		name  string
		wname string // "" when the name is refused
	}{
		{"Manual", "Manual"},
		{"Random", "Random"},
		{"RoundRobin", "RoundRobin"},
		{"KeyHash", "KeyHash"},
		{"random", ""},
		{"", ""},
		{"Key", ""},
		{"keyhash", ""},
		{"roundrobin", ""},
		{" KeyHash", ""},
		{"Manual\x00", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			p, err := tributary.ParsePartitioner(tt.name)
			if tt.wname == "" {
				if !errors.Is(err, tributary.ErrInvalidArgument) || p != nil {
					t.Fatalf("ParsePartitioner(%q) = %v, %v; want nil, ErrInvalidArgument", tt.name, p, err)
				}
				for _, w := range []string{fmt.Sprintf("%q", tt.name), `"Manual"`, `"Random"`, `"RoundRobin"`, `"KeyHash"`} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				return
			}
			if err != nil || p == nil || p.Name() != tt.wname {
				t.Fatalf("ParsePartitioner(%q) = %v, %v; want a %q partitioner", tt.name, p, err, tt.wname)
			}
		})
	}
	t.Run("round trip", func(t *testing.T) {
		// One name per strategy: each built-in's Name parses back to a
		// partitioner of that name, so a Producer's Strategy() can be fed
		// to ParsePartitioner.
		for _, p := range []tributary.Partitioner{tributary.Manual(), tributary.Random(), tributary.RandomSeeded(1), tributary.RoundRobin(), tributary.KeyHash()} {
			q, err := tributary.ParsePartitioner(p.Name())
			if err != nil || q.Name() != p.Name() {
				t.Errorf("ParsePartitioner(%q) = %v, %v; want a %q partitioner", p.Name(), q, err, p.Name())
			}
		}
	})
	t.Run("fresh", func(t *testing.T) {
		a, _ := tributary.ParsePartitioner("RoundRobin")
		b, _ := tributary.ParsePartitioner("RoundRobin")
		_, _ = a.Partition("", 0, 4)
		if got, _ := b.Partition("", 0, 4); got != 0 {
			t.Errorf("second RoundRobin's first partition = %d, want 0: counters shared", got)
		}
	})
}

func ExampleKeyHash() {
	p := tributary.KeyHash()
	for _, key := range []string{"21", "foobar", "abc", "foobar"} {
		part, _ := p.Partition(key, 0, 10)
		fmt.Printf("%s → %d\n", key, part)
	}
	// An empty key is no key: round-robin.
	for range 3 {
		part, _ := p.Partition("", 0, 10)
		fmt.Printf("(no key) → %d\n", part)
	}
	// Output:
	// 21 → 0
	// foobar → 6
	// abc → 7
	// foobar → 6
	// (no key) → 0
	// (no key) → 1
	// (no key) → 2
}

func ExampleMurmur2() {
	h := tributary.Murmur2("foobar")
	fmt.Println(h)
	fmt.Println(h&0x7fffffff, (h&0x7fffffff)%3)
	// Output:
	// -790332482
	// 1357151166 0
}

// vipFirst sends keys starting "vip-" to partition 0 and spreads the
// others by key hash over the remaining partitions.
type vipFirst struct{}

func (vipFirst) Name() string { return "VIPFirst" }

func (vipFirst) Partition(key string, _, partitions int32) (int32, error) {
	if strings.HasPrefix(key, "vip-") || partitions == 1 {
		return 0, nil
	}
	return 1 + (tributary.Murmur2(key)&0x7fffffff)%(partitions-1), nil
}

func ExamplePartitioner() {
	var p tributary.Partitioner = vipFirst{}
	for _, key := range []string{"vip-ada", "bob", "vip-cy", "eve", "gus"} {
		part, _ := p.Partition(key, 0, 4)
		fmt.Printf("%s → %d\n", key, part)
	}
	// Output:
	// vip-ada → 0
	// bob → 1
	// vip-cy → 0
	// eve → 3
	// gus → 2
}
