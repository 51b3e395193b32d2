// Package mediabench measures the node's media services the way issue 18
// asks, each beside the classic pipeline a user would pick instead, in one
// run on one node (a `convene serve` child, package convene):
//
//   - Composites: sessions of four cameras (a VP8 test card, 320×240 at
//     15 fps, encoded once and replayed by this process), each with a 2×2
//     640×360 15 fps composite the node makes; the composite's RTP, read
//     back through a receive-only link, is timed frame by frame against its
//     timestamps. The count grows until a composite misses the bar (Bar).
//     Beside it: plain ffmpeg doing the same xstack composite (the node's
//     own filter graph and encoder settings) from the same replayed
//     cameras, its RTP timed the same way.
//   - Thumbnails: N cameras, a grabber (package thumbnail) on each; JPEGs a
//     second against the N/3 the grabbers' 3 s interval asks for, and CPU
//     per thumbnail.
//   - HLS viewers: one session (a camera and a tone) streamed as HLS by
//     the node, and the same replayed packets encoded by ffmpeg's own HLS
//     muxer into a directory that Debian's nginx serves on loopback. N
//     viewers, Go clients of this process, follow each playlist as a
//     player does (Follower: reload the playlist, fetch every new segment
//     once, at real time; of the node's LL-HLS, the video's media
//     playlist that the multivariant one names, FirstVariant, in whole
//     fMP4 segments as a player without LL-HLS); N grows until a viewer misses a segment's
//     deadline or the bytes a second reach the machine's loopback limit
//     (LoopbackLimit, measured first).
//
// CPU is read from /proc: the node with its ffmpeg children (proc.TreeCPU),
// the peers' ffmpeg and nginx processes alike; the machine's busy share
// and what others took of it are reported beside every step, since a
// shared machine's other work shows as our latency.
package mediabench
