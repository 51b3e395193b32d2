package relay

import (
	"slices"
	"testing"
)

// Ports come in an order a third party cannot predict from the ports it
// has seen: not ascending from the bottom of the range.
func TestPortPoolDrawsAtRandom(t *testing.T) {
	p := newPortPool(30000, 39999)
	var got []int
	for range 20 {
		port, ok := p.get()
		if !ok || port%2 != 0 || port < 30000 || port > 39998 {
			t.Fatalf("drew %d, %v", port, ok)
		}
		got = append(got, port)
	}
	if slices.IsSorted(got) {
		t.Fatalf("20 draws came in ascending order: %v", got)
	}
	q := newPortPool(30000, 39999)
	var other []int
	for range 20 {
		port, _ := q.get()
		other = append(other, port)
	}
	if slices.Equal(got, other) {
		t.Fatalf("two pools drew the same sequence %v", got)
	}
}

// A pair just released is not handed out again while others are free; when
// nothing else is, it is.
func TestPortPoolHoldsBackFreedPorts(t *testing.T) {
	p := newPortPool(1000, 1199) // 100 pairs, 25 held back
	first, _ := p.get()
	p.put(first)
	for range 99 {
		if port, _ := p.get(); port == first {
			t.Fatal("a just-freed port was drawn again while others were free")
		}
	}
	if port, ok := p.get(); !ok || port != first {
		t.Fatalf("the last free port: %d, %v; want the held-back %d", port, ok, first)
	}
	if _, ok := p.get(); ok {
		t.Fatal("drew from an empty pool")
	}
	for port := 1000; port < 1200; port += 2 {
		p.put(port)
	}
	if p.available() != 100 {
		t.Fatalf("%d available after all were put back, want 100", p.available())
	}
	seen := map[int]bool{}
	for range 100 {
		port, ok := p.get()
		if !ok || seen[port] {
			t.Fatalf("drew %d (%v) twice or not at all", port, ok)
		}
		seen[port] = true
	}
}
