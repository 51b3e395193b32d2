// Package floorbench measures floor control and the session service
// against a real `convene serve` process on loopback, as `convene-bench
// floor` (part of make bench):
//
//   - request→grant: a member's WebSocket sends a floor request for a free
//     floor; the time until the same socket receives the Granted event;
//   - handover: the holder releases while another member waits; the time
//     from the release until the waiting member's socket gets its Granted
//     event (the token moving between two people: MCP's "transfer");
//   - session create: POST /api/v1/sessions until 201 (catalog write
//     included).
//
// The seed (mcp-multimedia-protocol-suite-bsd-kernel) measured 0.96 ms per
// token transfer in its kernel and 4.5 ms to create a conversation; the
// targets here are p50 < 0.2 ms and p99 < 1 ms for the floor, and < 1 ms
// for a create.
package floorbench
