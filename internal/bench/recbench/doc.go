// Package recbench measures Convene's recorder beside Janus's (VideoRoom
// rooms created with record=true, Debian's janus package) under the same
// load: how many streams each records at once with none lost, while a live
// listener in every room gets every packet on time.
//
// A stream is one pion WebRTC publisher (package rtctest) with one track:
// at 128 kb/s an audio-like Opus track, 50 packets a second of 320 bytes;
// at 5 Mb/s a video-like VP8 track, 30 frames a second of 1,200-byte
// packets, sent as frame bursts (a 96-packet keyframe every 2 s, 16
// packets in each other frame: 520 packets a second). Streams go into
// rooms of a few publishers: Convene sessions that WHIP publishers join,
// recorded through the recording API, and Janus VideoRoom rooms. In every
// room one listener (a Convene member over the signalling socket, a Janus
// subscriber of every feed) receives every stream live.
//
// Every packet's payload carries its send time where rtctest's Observe
// reads it, then a mark: the stream and the packet's number in it (see
// mark.go). Both servers rewrite RTP headers as they please (Janus
// renumbers what it records), so the recording is checked by the marks:
// for each step the benchmark knows which numbers every stream sent over
// the window, reads the files the servers wrote (Convene's rtpdump files
// with package rtpdump, Janus's .mjr files with mjr.go), and counts the
// numbers missing. A step passes when none is missing, no listener packet
// arrived later than rtcbench's bar (MaxP95ms) and the listeners lost
// under rtcbench's MaxLoss; the load must also have sent what it should,
// or the step does not count for the server. To place a failure, each step
// also reports what the server counted itself (Convene's recorder and
// forwarding drops, its own forwarding delay), the datagrams the kernel
// dropped at the server's sockets and at the load's (proc.UDPDrops), and
// how late the load sent against its schedule.
//
// A third series, convene-rtp (plain.go), feeds the same node the way
// Voyager's streams came: each stream plain RTP from a socket of its own,
// a link of the session with its codec named, and each room's listener a
// plain RTP link; the listener counts what it gets with rtctest's Recv,
// so both transports meet one bar. Janus's VideoRoom takes only WebRTC
// publishers, so the comparison with Janus is the WebRTC series.
//
// The number of streams grows step by step, rooms added to those already
// running, each system from its own fresh process pinned to a CPU of its
// own (proc.ServerCPU) while the publishers and listeners run in this
// process on the others. The answer is the most streams at the bar, and
// the streams per core of the server's CPU there.
package recbench
