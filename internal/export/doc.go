// Package export turns a recording's rtpdump streams into one file that
// any player opens: WAV (16-bit PCM) or Ogg/Opus for audio, WebM (VP8 and
// Opus) for audio and video.
//
// Every stream is placed on the recording's time line (zero is the
// manifest's Started, as in the rtpdump files' headers): its RTP
// timestamps give each packet's time within the stream, and the stream's
// start comes from the RTCP sender reports' NTP↔RTP mapping where the
// sender sent any (streams of one member keep the relationship their
// sender's clock gave them), else from the arrival offsets (the earliest
// arrival a packet's timestamp allows, which discounts network jitter).
// See Place.
//
// Audio: every audio stream (G.711, L16, Opus) is decoded, resampled to
// 48 kHz and mixed into one mono track, so the voices of all members are
// heard where they spoke; lost packets are silence. Video: WebM holds one
// VP8 stream that holds a keyframe: the session's composite if one was
// recorded (everyone's cameras in one picture: a chair starts one to
// export a meeting to one file), else the one with the most packets
// (simulcast's lowest layer first); frames broken by a lost packet are skipped up to the next
// keyframe. Export runs as fast as the disk and the Opus encoder allow,
// not in real time.
//
// Memory: one 20 ms frame per audio stream and one video frame at a time;
// a recording of any length exports in constant memory.
package export
