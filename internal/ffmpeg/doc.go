// Package ffmpeg runs ffmpeg as a supervised child process fed over local
// RTP: the engine of the media services Go has no well-kept library for
// (H.264 encoding for HLS, VP8 decoding for thumbnails).
//
// A Feed sends one of the room's streams to a UDP port on 127.0.0.1 that
// the child reads through an SDP file (SDP). It gives the stream its own
// SSRC, sequence numbers and timestamps, so a change of source (another
// speaker's camera, a restarted mixer) is one continuous stream to
// ffmpeg, and it sends an RTCP sender report every Report call, from one
// clock shared by a child's feeds (Clock), so ffmpeg places audio and
// video on one time line.
//
// A Proc keeps one child running: it starts it again when it exits
// (within a few hundred milliseconds, longer while it keeps failing),
// counts its -progress lines (on a pipe at file descriptor 3, four a
// second while it works) as beats for package supervise, and Kill lets
// the supervisor end a child that stopped beating.
//
// An Output takes what a child encodes (-f rtp to 127.0.0.1) and publishes
// it on a broker track under one SSRC, with sequence numbers and
// timestamps that run on across children, so a restart is a pause to the
// receivers, not a new stream. CPUMeter measures a child's CPU from /proc,
// the load that admission of composites and video transcoders counts.
package ffmpeg
