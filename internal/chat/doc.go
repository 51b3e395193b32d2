// Package chat carries a session's conversation (issue 17): chat and
// shared-data messages in the wire form of package conversation, between
// the members' sockets, kept in the catalog and on the time line of the
// session's recordings.
//
// The node is a relay that checks, not an orderer: each member's client
// (web/src/conversation.ts in the browser, package conversation in Go)
// delivers in per-sender and Δ-causal order itself. What the node does
// with a message from a member's socket, in order:
//
//  1. size (MaxMessage), rate (a token bucket per socket) and the wire
//     form (conversation.Unmarshal);
//  2. the header: this session's conversation, a known flow, the socket's
//     own member number as sender (nobody speaks for anyone else), a
//     sequence number not yet accepted and at most Reorder below the
//     sender's newest (a data channel is unordered), a context naming
//     members that exist;
//  3. the floor: a message of the board flow needs the session's "data"
//     floor (the chalkboard style: only its holder draws); the pointer
//     and the notes do not (everyone points at the board and edits the
//     meeting's notes);
//  4. the catalog (conversation_messages): once stored, it is accepted —
//     a node that dies after this loses nothing that was acknowledged;
//  5. every other socket of the session gets it as one binary frame, in
//     the order the node accepted them; a socket that cannot take more
//     (its queue of MaxQueue frames is full) is closed, never waited for;
//  6. the session's recordings get it on their time line (not the
//     pointer's positions).
//
// An endpoint that cannot order a conversation itself (a SIP phone) has
// an Agent: the node's own participant for its member, which delivers the
// chat in order to a callback (the SIP MESSAGEs to the phone) and says
// what the endpoint sends (its MESSAGEs) in its name.
//
// A member's number (its MemberID on the wire) is given by the catalog,
// from 1, the first time it opens a socket; 0 is the node. A socket
// starts with a hello: the conversation's ID, flows and Δ, the member's
// own number and last sequence number, every numbered member, and the
// last MaxHistory messages but the pointer's, with each sender's newest
// notes however old (hub.history).
package chat
