package conversation

import "container/heap"

// heldHeap orders held messages by deadline, then sender. Entries go stale
// (delivered, or no longer what they were pushed as) and are skipped by
// whoever pops them: see Receiver.head and Receiver.drain.
type heldHeap []*held

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return before(h[i], h[j]) }
func (h heldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)        { *h = append(*h, x.(*held)) }
func (h *heldHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

func (h *heldHeap) push(x *held) { heap.Push(h, x) }
func (h *heldHeap) pop() *held   { return heap.Pop(h).(*held) }
