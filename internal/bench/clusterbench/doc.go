// Package clusterbench measures a session spread over the nodes of a
// cluster (issue 16): one, two and three `convene serve` processes on
// three routed nats-server processes and one PostgreSQL catalog, with the
// seed's multiple-meeting workload — R sessions of M members (one speaker,
// the seed's 252-byte audio every 30 ms) whose members sit at N
// institutions, each institution a node.
//
// It reports, per layout, what the listeners saw (average and worst
// latency, late and lost packets) split into those on their speaker's node
// and those across a node hop, and, per node, its CPU and packet rates
// (delivered to listeners, taken from endpoints, sent to and received from
// other nodes) and the bytes it wrote to NATS per bridged packet.
//
// All nodes share this machine's cores, so "listeners served" cannot grow
// with the nodes here; instead the measurements fit a cost model — CPU per
// delivered packet, per packet taken from an endpoint, per packet sent to
// and per packet received from another node — that is checked against
// every measured node and used to predict the nodes needed for 10,000 and
// 100,000 users (Model).
//
// Whether N nodes carry N times one node's load is measured directly by
// giving N nodes N times the one node's sessions, each session placed on
// one node ("N placed xN"): every node is then as busy as the one node,
// and their CPU per delivered packet is compared with its. The same
// sessions placed on N nodes, and spread over N institutions, are shown
// beside it: the first is each node at 1/N of the load, the second costs
// what the seed's own arithmetic says (every institution takes in every
// stream).
package clusterbench
