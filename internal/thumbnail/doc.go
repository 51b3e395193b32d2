// Package thumbnail is the seed's image grabber: a JPEG of a video track
// every few seconds, for session and member lists.
//
// A Grabber taps one track (of a simulcast camera, the layer
// broker.Room.Best names: the highest heard in the last 2 s, not the
// primary one a small camera may never send) and feeds it over local RTP (package ffmpeg)
// to an ffmpeg child that decodes it (VP8 or H.264: Go has no well-kept
// VP8 decoder), keeps one frame per Interval, scales it to at most Width
// pixels wide and writes it to its standard output as a JPEG; the Grabber
// keeps the newest. The child's progress reports are its beats; while it
// has made no image, the feed asks the camera for a keyframe every 2 s
// (ffmpeg.Proc.CheckKeyframes). Grabbers run
// on demand: the first Get of a track starts one, and one that nobody
// asked for in Idle stops, as does one whose track left the room. At most
// Max run at once (ErrCapacity).
package thumbnail
