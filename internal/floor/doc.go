// Package floor is floor control for a session: the token mechanism of the
// MCP seed (mcp-multimedia-protocol-suite-bsd-kernel) with the request
// states of BFCP (RFC 8855 §5.2.5), so that a BFCP interface later is a
// translation.
//
// A session has one Floor per media kind ("audio", "video") and one for
// its shared data ("data": the whiteboard; package chat asks Holds before
// it takes a stroke, so the chalkboard style lets only the holder draw).
// A floor is
// controlled by tokens: a member may send media of that kind while it holds
// a token of the floor. The primitives are the seed's: request, grant,
// release, transfer, replicate (copy), delete and distribute, plus deny and
// cancel from BFCP. How tokens behave is the floor's Style, switchable while
// the session runs:
//
//	none               no control: everyone may send (the default; no cost)
//	floor_control      one token, FIFO queue; granted automatically or by a chair
//	brainstorming      every non-listener holds a replica
//	chalkboard         phase 1 the speaker only; phase 2 replicas to the
//	                   questioners, destroyed when the phase ends
//	discussion_groups  one token per subgroup, arbitrated inside it
//	activity_sensing   one token that moves to the first waiting requester once
//	                   the holder has been silent for a configurable 200–400 ms,
//	                   judged from the packets the holder's track publishes
//
// A Controller owns the floors of one session behind one mutex. It reports
// every request status change through Options.Emit and every change of who
// may send through Options.Gate, both called with that mutex held so the
// order of events is the order of changes; neither may call back into the
// Controller (lock order: Controller.mu, then whatever Emit and Gate take).
//
// Files: controller.go (the Controller and its lock), primitives.go (the
// primitives), tokens.go (how tokens move), styles.go (styles and phases),
// members.go (roles, subgroups, leaving), state.go (views), sensing.go
// (activity sensing), persist.go (saving and restoring the floors).
package floor
