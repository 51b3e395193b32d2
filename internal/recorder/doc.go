// Package recorder records every stream of a session as it reaches the
// broker, the way the Voyager seed's recording daemon did: each SSRC in a
// file of its own in rtptools' rtpdump format (package rtpdump), packets
// kept byte for byte with their arrival times, beside a JSON sidecar with
// what a player needs to decode and synchronise it.
//
// A Recording taps every track of a broker.Room (broker.Room.Tap), also
// tracks that appear later, and joins the room once per media kind as a
// member that sends nothing, to hear the room's RTCP and to be told of new
// tracks (broker.Member.OnChange). A tap's Deliver only puts the packet in
// the recording's bounded queue; when the queue is full it drops and
// counts the packet (convene_recorder_dropped_packets_total{reason=
// "queue_full"}) and flags a slow disk: a publisher is never held up.
//
// One goroutine per recording owns the files: it demultiplexes by track
// and SSRC (a new SSRC on a track is a new stream file), writes through a
// buffer per stream and hands the buffers to the kernel (write(2)) in
// whole pages when they fill and on a timer every Options.FlushEvery
// (200 ms); what is left of a page is written at the next tick if it is
// still there. Every Options.SyncEvery its syncer makes them durable,
// by a syncfs(2) round every recording on the file system shares
// (syncfs.go). After a kill -9 the
// packets that arrived more than twice FlushEvery plus the queue's delay
// before are in the files; Repair cuts a torn last record and marks the
// recording interrupted.
//
// On disk, a recording's directory holds:
//
//	manifest.json           the session, its state (recording, finished,
//	                        interrupted, failed), streams and time line
//	events.jsonl            the time line while recording, one event a line
//	NNN-KIND-SSRC.rtpdump   one stream (RTP and the RTCP of its SSRC)
//	NNN-KIND-SSRC.json      its sidecar: SSRC, member, track, kind,
//	                        payload types, clock rate, first packet's
//	                        wall-clock time, RTCP sender reports
//
// Every offset (rtpdump records, events, sender reports) counts
// milliseconds from the recording's start, the Start of every stream
// file's header, so the streams share one time line.
//
// Memory: a tap holds its reference to the broker's pooled packet while
// the packet waits in the queue; the writer goroutine copies it into the
// stream's buffer and releases it.
//
// Lock order: Recording.mu, then broker.Room's mutex (scan taps tracks
// while holding mu). The broker never calls the recording with its mutex
// held.
package recorder
