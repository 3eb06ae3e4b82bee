package tributary

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Partitioner chooses the partition of each message a Producer sends; its
// strategy is fixed when the producer is made. Manual, Random, RoundRobin
// and KeyHash are built in; users may implement their own. Implementations
// must be safe for concurrent use: a producer's sends may run in many
// goroutines at once.
type Partitioner interface {
	// Name is the strategy's name. The built-ins are named as their
	// constructors: "Manual", "Random" (RandomSeeded's too), "RoundRobin",
	// "KeyHash"; ParsePartitioner takes these names back. A user's
	// partitioner names itself.
	Name() string
	// Partition returns the partition in [0, partitions) for a message
	// with this key; partition is the Partition field the caller set on
	// the message (only Manual reads it); partitions is the topic's
	// partition count, >= 1. The producer checks the result's range, so
	// an answer outside it fails the send rather than misroutes it. An
	// error fails the send and is returned to its caller.
	Partition(key string, partition, partitions int32) (int32, error)
}

// checkPartitions is the error of a built-in Partitioner (other than
// Manual) called with a partition count below 1, which a producer never
// passes: there is no partition to choose.
func checkPartitions(name string, partitions int32) error {
	if partitions < 1 {
		return fmt.Errorf("%w: %s partitioner: partition count %d, want >= 1", ErrInvalidArgument, name, partitions)
	}
	return nil
}

// Manual returns the Partitioner named "Manual": Partition returns the
// caller's partition as given, never fails, and ignores the key and the
// partition count (the producer range-checks the answer). It holds no
// state.
func Manual() Partitioner { return manual{} }

type manual struct{}

func (manual) Name() string { return "Manual" }

func (manual) Partition(_ string, partition, _ int32) (int32, error) { return partition, nil }

// Random returns the Partitioner named "Random": Partition ignores the key
// and the caller's partition and returns a partition drawn uniformly from
// [0, partitions) by math/rand/v2's global, concurrency-safe source. It
// returns an error wrapping ErrInvalidArgument, and -1, if partitions < 1.
func Random() Partitioner { return random{} }

type random struct{}

func (random) Name() string { return "Random" }

func (random) Partition(_ string, _, partitions int32) (int32, error) {
	if err := checkPartitions("Random", partitions); err != nil {
		return -1, err
	}
	return rand.Int32N(partitions), nil
}

// RandomSeeded returns a Partitioner named "Random" that draws uniformly
// from [0, partitions) like Random, but from a source of its own seeded
// with seed (math/rand/v2's PCG), so that the same seed and the same
// sequence of calls give the same partitions: reproducible runs (the
// program's -seed). It is safe for concurrent use (a mutex guards the
// source; concurrent calls take the draws in the order they get it). It
// returns an error wrapping ErrInvalidArgument, and -1, if partitions < 1,
// without drawing.
func RandomSeeded(seed uint64) Partitioner {
	return &seededRandom{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

type seededRandom struct {
	mu sync.Mutex // guards r
	r  *rand.Rand
}

func (*seededRandom) Name() string { return "Random" }

func (s *seededRandom) Partition(_ string, _, partitions int32) (int32, error) {
	if err := checkPartitions("Random", partitions); err != nil {
		return -1, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Int32N(partitions), nil
}

// RoundRobin returns a Partitioner named "RoundRobin" with a fresh counter
// of its own: its calls of Partition, concurrent or not, return 0, 1, 2, …,
// partitions-1, 0, 1, … (the i-th call, counting from 0, returns i mod
// partitions; the counter is one atomic add, lock-free, and does not wrap
// in practice: 2^64 calls). The key and the caller's partition are ignored.
// It returns an error wrapping ErrInvalidArgument, and -1, if
// partitions < 1, without advancing the counter.
func RoundRobin() Partitioner { return &roundRobin{} }

type roundRobin struct {
	next atomic.Uint64 // calls so far that chose a partition
}

func (*roundRobin) Name() string { return "RoundRobin" }

func (r *roundRobin) Partition(_ string, _, partitions int32) (int32, error) {
	if err := checkPartitions("RoundRobin", partitions); err != nil {
		return -1, err
	}
	return r.pick(partitions), nil
}

// pick advances the counter and returns its old value mod partitions (>= 1).
func (r *roundRobin) pick(partitions int32) int32 {
	return int32((r.next.Add(1) - 1) % uint64(partitions))
}

// KeyHash returns a Partitioner named "KeyHash", Kafka's default partitioner
// for keyed messages: a message with a non-empty key goes to partition
// (Murmur2(key) & 0x7fffffff) % partitions, so one key always lands on one
// partition (of a topic whose partition count does not change) and on the
// same partition a Kafka producer would choose for it.
//
// An EMPTY key means "no key": such messages are spread round-robin, by a
// counter of this Partitioner's own, as Kafka spreads messages whose key is
// null. (Kafka hashes an empty but non-null key; a Go string cannot tell
// the two apart.) The caller's partition is ignored. It returns an error
// wrapping ErrInvalidArgument, and -1, if partitions < 1.
func KeyHash() Partitioner { return &keyHash{} }

type keyHash struct {
	noKey roundRobin // the fallback for messages with an empty key
}

func (*keyHash) Name() string { return "KeyHash" }

func (k *keyHash) Partition(key string, _, partitions int32) (int32, error) {
	if err := checkPartitions("KeyHash", partitions); err != nil {
		return -1, err
	}
	if key == "" {
		return k.noKey.pick(partitions), nil
	}
	return (Murmur2(key) & 0x7fffffff) % partitions, nil
}

// Murmur2 returns the 32-bit MurmurHash2 of key's bytes exactly as Kafka's
// Utils.murmur2 computes it (seed 0x9747b28c, m 0x5bd1e995, r 24, bytes
// read little-endian in fours), as the same signed value Java returns. For
// example Murmur2("21") is -973932308. It allocates nothing.
func Murmur2(key string) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(key)
	h := uint32(seed) ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(key[i]) | uint32(key[i+1])<<8 | uint32(key[i+2])<<16 | uint32(key[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(key[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(key[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(key[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// ParsePartitioner returns a fresh Partitioner for one of the built-in
// names, as Name spells them (exact and case-sensitive): "Manual",
// "Random", "RoundRobin" or "KeyHash", so ParsePartitioner(p.Name()) makes
// a partitioner of p's strategy for any built-in p. Any other name is an
// error wrapping ErrInvalidArgument that names the accepted ones.
func ParsePartitioner(name string) (Partitioner, error) {
	switch name {
	case "Manual":
		return Manual(), nil
	case "Random":
		return Random(), nil
	case "RoundRobin":
		return RoundRobin(), nil
	case "KeyHash":
		return KeyHash(), nil
	}
	return nil, fmt.Errorf(`%w: partitioner %q: want "Manual", "Random", "RoundRobin" or "KeyHash"`, ErrInvalidArgument, name)
}
