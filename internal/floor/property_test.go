package floor

import (
	"math/rand"
	"testing"
)

// Random sequences of every primitive (fixed seeds) against the token
// invariants: under floor control never two holders and the floor's token
// never lost, also when holders leave; after a chalkboard phase ends no
// replica is left; a listener never holds anything.
func TestTokenInvariantsRandom(t *testing.T) {
	styles := []string{StyleFloorControl, StyleActivity, StyleChalkboard, StyleBrainstorming, StyleDiscussion}
	held := map[string]int{} // steps with a holder, by style: the sequences must exercise tokens
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		c, _ := newCtl(t)
		ids := []string{"c1", "a", "b", "d", "e", "l1"}
		live := map[string]bool{}
		join := func(m string) {
			role := RoleParticipant
			if m[0] == 'c' {
				role = RoleChair
			} else if m[0] == 'l' {
				role = RoleListener
			}
			c.AddMember(m, role, []string{"", "g"}[rng.Intn(2)])
			live[m] = true
		}
		for _, m := range ids {
			join(m)
		}
		style := styles[rng.Intn(len(styles))]
		mustStyle(t, c, "audio", Settings{Style: style, Auto: rng.Intn(2) == 0})
		for step := 0; step < 300; step++ {
			m := ids[rng.Intn(len(ids))]
			to := ids[rng.Intn(len(ids))]
			st, _ := c.State("audio")
			tok := ""
			if len(st.Tokens) > 0 {
				tok = st.Tokens[rng.Intn(len(st.Tokens))].ID
			}
			req := ""
			if len(st.Queue) > 0 {
				req = st.Queue[rng.Intn(len(st.Queue))].ID
			}
			phaseBefore := st.Phase
			switch rng.Intn(12) {
			case 0, 1:
				c.Request(m, "audio")
			case 2:
				c.Release(m, "audio")
			case 3:
				c.Grant("c1", req)
			case 4:
				c.Deny("c1", req)
			case 5:
				c.Cancel(m, req)
			case 6:
				c.Transfer(m, "audio", to)
			case 7:
				c.Replicate(m, "audio", to)
			case 8:
				c.Delete(m, "audio", tok)
			case 9:
				c.Distribute("c1", "audio", nil)
			case 10:
				if live[m] {
					c.RemoveMember(m)
					delete(live, m)
				} else {
					join(m)
				}
			case 11:
				if style == StyleChalkboard {
					c.Advance("c1", "audio")
				} else if style == StyleDiscussion && live[m] {
					c.SetGroup(m, []string{"", "g", "h"}[rng.Intn(3)])
				}
			}
			st, _ = c.State("audio")
			holders := map[string]int{}
			primaries := map[string]int{}
			for _, tk := range st.Tokens {
				if tk.Holder != "" {
					holders[tk.Holder]++
					if !live[tk.Holder] {
						t.Fatalf("seed %d step %d: %s left but holds %+v", seed, step, tk.Holder, tk)
					}
				}
				if !tk.Replica {
					primaries[tk.Group]++
				}
			}
			if len(holders) > 0 {
				held[style]++
			}
			for h, n := range holders {
				if n > 1 || h[0] == 'l' {
					t.Fatalf("seed %d step %d: %s holds %d tokens", seed, step, h, n)
				}
			}
			switch style {
			case StyleFloorControl, StyleActivity:
				if len(holders) > 1 {
					t.Fatalf("seed %d step %d: %s has holders %v", seed, step, style, holders)
				}
				if primaries[""] != 1 {
					t.Fatalf("seed %d step %d: the floor's token was lost: %+v", seed, step, st.Tokens)
				}
			case StyleChalkboard:
				if phaseBefore == 2 && st.Phase == 1 {
					for _, tk := range st.Tokens {
						if tk.Replica {
							t.Fatalf("seed %d step %d: replica %+v survived phase 2", seed, step, tk)
						}
					}
				}
				if primaries[""] != 1 {
					t.Fatalf("seed %d step %d: the speaker's token was lost", seed, step)
				}
			case StyleDiscussion:
				for g, n := range primaries {
					if n != 1 {
						t.Fatalf("seed %d step %d: group %q has %d tokens", seed, step, g, n)
					}
				}
			}
			// A holder's own view agrees with the tokens.
			for h := range holders {
				if !c.Holds(h, "audio") {
					t.Fatalf("seed %d step %d: Holds(%s) false", seed, step, h)
				}
			}
		}
	}
	for _, st := range styles {
		if held[st] < 100 {
			t.Errorf("style %s had a holder in only %d steps: the sequences test little", st, held[st])
		}
	}
}
