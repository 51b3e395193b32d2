package clusterbench

import "testing"

// TestHopLayouts: in the hop layouts every speaker is on the first node
// and no listener is; with three nodes the listeners alternate between
// the other two, so the first node sends each packet twice.
func TestHopLayouts(t *testing.T) {
	for _, l := range Layouts(4, 5) {
		if !l.Hop {
			continue
		}
		count := make([]int, l.Nodes)
		for r := range l.Sessions {
			if l.node(r, 0) != 0 {
				t.Fatalf("%s: speaker of session %d on node %d", l.Name, r, l.node(r, 0))
			}
			for k := 1; k < l.Members; k++ {
				count[l.node(r, k)]++
			}
		}
		if count[0] != 0 {
			t.Fatalf("%s: %d listeners on the speakers' node", l.Name, count[0])
		}
		for i := 1; i < l.Nodes; i++ {
			if want := l.Sessions * (l.Members - 1) / (l.Nodes - 1); count[i] != want {
				t.Fatalf("%s: %v listeners by node, want %d on each other node", l.Name, count, want)
			}
		}
	}
}

// TestPlacedLayouts: in a placed layout every member of a session is on
// one node, and the sessions share the nodes evenly.
func TestPlacedLayouts(t *testing.T) {
	n := 0
	for _, l := range Layouts(6, 5) {
		if !l.Placed {
			continue
		}
		n++
		count := make([]int, l.Nodes)
		for r := range l.Sessions {
			home := l.node(r, 0)
			for k := 1; k < l.Members; k++ {
				if l.node(r, k) != home {
					t.Fatalf("%s: member %d of session %d on node %d, its speaker on %d", l.Name, k, r, l.node(r, k), home)
				}
			}
			count[home]++
		}
		if l.Sessions != 6 && l.Sessions != 6*l.Nodes {
			t.Fatalf("%s: %d sessions, want R or N×R", l.Name, l.Sessions)
		}
		for i, c := range count {
			if c != l.Sessions/l.Nodes {
				t.Fatalf("%s: %v sessions by node (node %d)", l.Name, count, i)
			}
		}
	}
	if n != 4 {
		t.Fatalf("%d placed layouts, want 4 (on 2 and 3 nodes, R and N×R sessions)", n)
	}
}
