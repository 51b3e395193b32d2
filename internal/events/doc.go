// Package events is the per-session event stream: every change of a
// session (state, membership, subgroups, floors, links) gets the next
// sequence number of its session, is kept in a bounded in-memory log, is
// handed to the stream's subscribers (the WebSocket clients of
// /api/v1/sessions/{id}/events), and is published on NATS as
// convene.session.<id>.<type> with the same number.
//
// The log is in memory, not in the catalog: floor events come at the rate
// people talk (activity sensing moves tokens every few hundred ms), and a
// catalog write per event would put SQLite in the floor's request→grant
// path. A reconnecting client resumes with ?after=<last seq>: it gets every
// event after that one still in the log, then the live ones, without a gap
// or a repeat; if the events it missed have left the log (more than Keep
// events, or a restart) it is told so (gap) and should re-read the state.
//
// Sequence numbers survive restarts without repeating: a session's numbers
// in one run of the node start at (the node's start time in seconds) << 20,
// so they stay below 2^53 (exact in JavaScript) and each run's are larger
// than any earlier run's unless a run published more than 2^20 events per
// second of the time between the two starts.
package events
