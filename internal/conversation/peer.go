package conversation

import "slices"

func (p *peer) find(seq uint64) int {
	i, ok := slices.BinarySearchFunc(p.queue, seq, func(h *held, s uint64) int {
		switch {
		case h.m.Seq < s:
			return -1
		case h.m.Seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

func (p *peer) insert(h *held) {
	i, _ := slices.BinarySearchFunc(p.queue, h.m.Seq, func(x *held, s uint64) int {
		if x.m.Seq < s {
			return -1
		}
		return 1
	})
	p.queue = slices.Insert(p.queue, i, h)
}

func (p *peer) addGap(g Gap) {
	if len(p.gaps) == maxGaps {
		p.gaps = slices.Delete(p.gaps, 0, 1)
	}
	p.gaps = append(p.gaps, g)
}

// takeGap reports whether seq was declared missing, and forgets it.
func (p *peer) takeGap(seq uint64) bool {
	for i, g := range p.gaps {
		if seq < g.First || seq > g.Last {
			continue
		}
		switch {
		case g.First == g.Last:
			p.gaps = slices.Delete(p.gaps, i, i+1)
		case seq == g.First:
			p.gaps[i].First++
		case seq == g.Last:
			p.gaps[i].Last--
		default:
			p.gaps[i].Last = seq - 1
			p.gaps = slices.Insert(p.gaps, i+1, Gap{g.Member, seq + 1, g.Last})
			if len(p.gaps) > maxGaps {
				p.gaps = slices.Delete(p.gaps, 0, 1)
			}
		}
		return true
	}
	return false
}
