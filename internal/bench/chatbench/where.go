package chatbench

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Share is a part of the node's CPU profile, in percent of its samples.
type Share struct {
	What string  `json:"what"`
	Pct  float64 `json:"pct"`
}

// parts name where a conversation's CPU goes: a sample counts for the
// first part any function on its stack belongs to.
var parts = []struct{ what, fn string }{
	{"storing each message (catalog.AddMessage, SQLite)", "catalog.(*Store).AddMessage"},
	{"writing frames to the members' sockets", "websocket.(*Conn).Write"},
	{"reading frames from the members' sockets", "websocket.(*Conn).Read"},
	{"the chat checks and fan-out", "internal/chat."},
	{"garbage collection", "runtime.gcBgMarkWorker"},
}

// where reads a CPU profile and says how its samples divide among parts,
// largest first, the rest as "other (scheduler, network poller, HTTP)"; nil when the
// profile cannot be read.
func where(path string) []Share {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil || len(p.SampleType) == 0 {
		return nil
	}
	v := len(p.SampleType) - 1 // cpu nanoseconds
	counts := make([]int64, len(parts)+1)
	var total int64
	for _, s := range p.Sample {
		n := s.Value[v]
		total += n
		counts[part(s)] += n
	}
	if total == 0 {
		return nil
	}
	var out []Share
	for i, c := range counts {
		what := "other (scheduler, network poller, HTTP)"
		if i < len(parts) {
			what = parts[i].what
		}
		out = append(out, Share{What: what, Pct: 100 * float64(c) / float64(total)})
	}
	slices.SortStableFunc(out, func(a, b Share) int { return cmp.Compare(b.Pct, a.Pct) })
	return out
}

// part is the index of the first part a sample's stack is in, len(parts)
// when none.
func part(s *profile.Sample) int {
	for i, pt := range parts {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil && strings.Contains(l.Function.Name, pt.fn) {
					return i
				}
			}
		}
	}
	return len(parts)
}

// shares says the shares in one line.
func shares(ss []Share) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f %%", s.What, s.Pct)
	}
	return b.String()
}
