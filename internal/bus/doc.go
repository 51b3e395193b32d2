// Package bus is Convene's control plane on top of NATS.
//
// A [Bus] is either backed by an embedded nats-server running in-process
// (Options.URL == ""; optionally also listening on Options.Listen so that
// outside tools such as the nats CLI can connect) or by a connection to an
// external NATS deployment (Options.URL set).
//
// # Subjects
//
// Every message is a JSON encoded [Event]. IDs are used as single subject
// tokens and must therefore be non-empty and must not contain '.', '*', '>',
// whitespace or control characters; the helpers reject such IDs with
// [ErrInvalidToken].
//
// Session lifecycle (see [SessionSubject], [Bus.SessionEvent]):
//
//	convene.session.<sessionID>.created
//	convene.session.<sessionID>.activated
//	convene.session.<sessionID>.deactivated
//	convene.session.<sessionID>.finished
//	convene.session.<sessionID>.canceled
//
// Session links (see [SessionSubject], [Bus.SessionEvent]):
//
//	convene.session.<sessionID>.link.added
//	convene.session.<sessionID>.link.removed
//
// Nodes (see [NodeSubject], [Bus.NodeEvent], [Bus.RunHeartbeat]):
//
//	convene.node.<nodeID>.heartbeat   published every heartbeat interval; Data is a [Heartbeat]
//	convene.node.<nodeID>.draining    the node accepts no new sessions
//	convene.node.<nodeID>.stopped     the node has shut down its control plane
//	convene.ping.<nodeID>             request/reply: answered at once with an empty
//	                                  reply; other nodes time it (package peerdelay)
//
// Useful wildcards: [AllSessionEvents] (convene.session.>), [AllNodeEvents]
// (convene.node.>), [AllHeartbeats] (convene.node.*.heartbeat) and
// [SessionWildcard] (convene.session.<sessionID>.>).
//
// Event.Type carries the event type without the subject prefix, e.g.
// "created", "link.added" or "heartbeat".
package bus
