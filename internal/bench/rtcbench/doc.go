// Package rtcbench measures Convene's WebRTC forwarding beside Janus
// VideoRoom (Debian's janus package) under the same load: one publisher
// (audio, or audio and simulcast video) and a growing number of
// subscribers over DTLS-SRTP on loopback. The subscribers run in a load
// process of their own (`convene-bench rtc-load`, pion clients from
// internal/rtctest), so the server's CPU is its own; for each step the
// report gives loss, one-way latency, the server's CPU per subscriber and
// its SRTP packets per second per core, and the join time.
package rtcbench
