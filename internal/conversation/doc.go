// Package conversation orders the messages of a multi-flow conversation:
// chat, whiteboard strokes, pointer, notes… sent by a session's members.
// It is the MCP seed's (mcp-multimedia-protocol-suite-bsd-kernel)
// multi-flow conversation with its temporal synchronization and
// Δ-causality, as issue 17 asks.
//
// # Δ
//
// Each flow Fi has a desired delay δi (beyond it quality deteriorates) and a
// loss delay λi (beyond it delivery is useless). The seed computes
// Δ1 = max δi and Δ2 = min λi and chooses the causality interval Δ with
// Δ1 < Δ < Δ2, at least Δ1 + 2ε (ε the largest clock skew): New takes
// Δ = max(Spec.Delta, Δ1 + 2ε) and refuses a conversation where Δ ≥ Δ2.
//
// # Order
//
// A sender's messages on all flows share one sequence space (the seed's
// temporal synchronization): a receiver delivers them in that order, across
// flows. Each message carries the sender's causal context; a Receiver
// delivers it only after what it depends on (Δ-causal order), or at its
// deadline, min(sent, arrival) + Δ, with an exception (Delivery.Missing)
// naming the sender and sequence numbers that never came; they are then
// declared missing. A message that arrives after its deadline, or after it
// was declared missing, is delivered at once as Late: never silently
// reordered. Duplicates are dropped. A receiver holds at most Spec.Buffer
// messages; one more forces out the earliest with status Overflow.
// Held messages wait in the seed's dependency lists: a heap of heads that
// are ready, and per member the heads blocked on its next message.
//
// The guarantee is the seed's: every message in a delivered message's
// causal past that was still within its own deadline was delivered before
// it. One lost deeper in the chain, already past its deadline, is not
// named by the dependent message (the context names direct dependencies
// only: see below); it is named when its sender's next message is forced,
// or reported Late if it comes.
//
// # Context and its size
//
// The seed's context is a (participant, last sequence number) pair for
// every participant. Here a message carries only its direct dependencies
// since the sender's previous message, the seed's dependency list: what the
// sender delivered since then that nothing else it delivered depends on
// (Participant keeps that frontier). The receiver gets the rest
// transitively, and its deadline order covers what was lost. Entries are
// varints, members as gaps. Bytes of context per message
// (BenchmarkContextSize; 20–500 ms delay, no loss):
//
//	members                 10     100    1,000
//	chat, 20 msg/s         7.8     8.9     11.0   direct dependencies (this)
//	                      14.7   129.7    923.5   entries changed since the previous message
//	                      22.2   191.4  1,173     full vector
//	whiteboard, 200 msg/s  9.0    39.6     44.3   direct dependencies (this)
//	                       9.2   122.8    883.0   changed entries
//	                      21.4   186.8  1,098     full vector
//
// The context grows with the messages in flight at once, not with members.
// The whole header (below) is 19–23 bytes for chat, 20–56 for the whiteboard.
//
// # Latency ordering adds
//
// Delivery − arrival at each receiver, over every arrival, under the
// seed's workload (20–500 ms delay, 1 % loss, 20 msg/s;
// BenchmarkOrderingHold), in ms:
//
//	members                   10     100    1,000
//	Δ 200 ms (seed's flows)
//	  p50 / p99            0/162   0/156    0/153
//	  mean                  13.0    11.5      9.3
//	  held at all            17 %    16 %     13 %   (62 % arrive late: at once)
//	Δ 500 ms
//	  p50 / p99            0/328   0/299    0/286
//	  mean                  27.4    23.4     18.7
//	  held at all            23 %    21 %     17 %   (none late)
//
// A message waits only when it overtook what it depends on, at most until
// its deadline; through one node, which forwards in one order over TCP,
// nothing overtakes, and ordering costs the Receiver's few microseconds
// (convene-bench chat measures it live).
//
// # Wire format
//
// See Message.AppendTo: a version byte, then varints: conversation, flow,
// sender, seq, send time in Unix milliseconds, the context count and its
// (member gap, seq) pairs; the payload is the rest. Unmarshal decodes
// outside input without panicking (FuzzUnmarshal). web/src/conversation.ts
// is the same receiver and encoding in TypeScript; both run the shared
// vectors testdata/vectors/*.json and testdata/wire.json.
//
// Files: spec.go (Spec, Δ), message.go (the header and its wire form),
// delivery.go (what a receiver hands out), receiver.go (the Receiver),
// order.go (when it delivers, what it declares missing), peer.go (per
// sender state), heap.go, participant.go (sending).
package conversation
