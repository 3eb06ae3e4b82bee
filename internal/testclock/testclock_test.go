package testclock

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	c := New()
	if got := c.Now(); !got.Equal(Epoch) {
		t.Fatalf("New().Now() = %v, want %v", got, Epoch)
	}
	if got := c.Advance(90 * time.Second); !got.Equal(Epoch.Add(90 * time.Second)) {
		t.Fatalf("Advance returned %v", got)
	}
	if got := c.Now(); !got.Equal(Epoch.Add(90 * time.Second)) {
		t.Fatalf("after Advance: %v", got)
	}
	if c.Reads() != 2 {
		t.Fatalf("Reads = %d, want 2", c.Reads())
	}
	at := time.Date(2030, 5, 6, 7, 8, 9, 10, time.UTC)
	c.Set(at)
	if got := c.Now(); !got.Equal(at) || got.Location() != time.UTC {
		t.Fatalf("after Set: %v", got)
	}
	var zero Clock
	if got := zero.Now(); !got.IsZero() {
		t.Fatalf("zero Clock reads %v, want the zero time", got)
	}
	if got := At(at).Now(); !got.Equal(at) {
		t.Fatalf("At: %v", got)
	}
}

func TestClockConcurrent(t *testing.T) {
	c := New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), Epoch.Add(8000*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after 8000 concurrent advances: %v, want %v", got, want)
	}
	if c.Reads() != 8001 {
		t.Fatalf("Reads = %d, want 8001", c.Reads())
	}
}
