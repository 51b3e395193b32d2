// Package chatbench measures a session's conversation through the node,
// as `convene-bench chat` (part of make bench; issue 17's benchmark),
// against a real `convene serve` process on loopback:
//
//   - through the node: sessions of 10 and 100 members, each member a Go
//     client (package conversation's Participant, as internal/node's chat
//     tests drive it) on its own conversation WebSocket. The offered rate,
//     in messages a second across all members, is stepped up (each member
//     under chat.Rate, the node's cap per socket; more sessions when the
//     members of one cannot offer it); each message carries its send time
//     in its payload (Stamp). A step measures messages accepted and
//     deliveries (each message to every other member of its session) a
//     second, end-to-end latency from the send to each receiver's socket
//     read, lost and refused messages, and the node's CPU: messages and
//     deliveries a second per core. A step passes when every message
//     reached every receiver and p99 < 100 ms;
//   - the latency ordering adds: each receiving client runs its
//     Receiver; delivery − arrival at each receiver (the simulated figure
//     under the seed's loss and delay is BenchmarkOrderingHold in package
//     conversation, make microbench);
//   - conversation join: from dialling the socket to its hello, a
//     member's first join (its number in the catalog included), beside
//     the seed's conversation-create (4.5 ms); the floor token figures of
//     the newest `convene-bench floor` report beside the seed's 0.96 ms.
package chatbench
