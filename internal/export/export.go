package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/at-wat/ebml-go/mkvcore"
	"github.com/at-wat/ebml-go/webm"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4/pkg/media/oggwriter"

	"github.com/convene/convene/internal/codec"
)

// Format is a file format to export to.
type Format string

// Formats.
const (
	WAV  Format = "wav"  // 48 kHz 16-bit mono PCM: the audio streams mixed
	Ogg  Format = "ogg"  // Opus in Ogg (RFC 7845): the audio streams mixed
	WebM Format = "webm" // VP8 (one video stream) and Opus (the mix)
)

// ContentType is the format's media type.
func (f Format) ContentType() string {
	switch f {
	case WAV:
		return "audio/wav"
	case Ogg:
		return "audio/ogg"
	case WebM:
		return "video/webm"
	}
	return "application/octet-stream"
}

// ParseFormat reads a format's name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case WAV, Ogg, WebM:
		return f, nil
	}
	return "", fmt.Errorf("export: format %q: want wav, ogg or webm", s)
}

// Progress is told how much of the time line is written, every second of
// it and at the end.
type Progress func(done, total time.Duration)

// Size returns the exact byte size of the export when the format's size
// is known ahead (WAV), else -1.
func (rec *Recording) Size(f Format) int64 {
	if f != WAV || len(rec.Audio) == 0 {
		return -1
	}
	frames := int64((rec.Duration*Rate/time.Second + Frame - 1) / Frame)
	return 44 + frames*Frame*2
}

// Write exports the recording in format f to w. Nothing is written when
// the recording has no stream the format holds (ErrNoStreams).
func (rec *Recording) Write(w io.Writer, f Format, progress Progress) error {
	if progress == nil {
		progress = func(time.Duration, time.Duration) {}
	}
	switch f {
	case WAV:
		return rec.writeWAV(w, progress)
	case Ogg:
		return rec.writeOgg(w, progress)
	case WebM:
		return rec.writeWebM(w, progress)
	}
	return fmt.Errorf("export: format %q", f)
}

// report calls progress once per second of the time line.
func report(progress Progress, at, total time.Duration) {
	if at%time.Second == 0 {
		progress(at, total)
	}
}

// reporter calls progress each time at reaches another whole second.
func reporter(progress Progress, total time.Duration) func(at time.Duration) {
	next := time.Duration(0)
	return func(at time.Duration) {
		if at >= next {
			progress(at.Truncate(time.Second), total)
			next = at.Truncate(time.Second) + time.Second
		}
	}
}

func (rec *Recording) writeWAV(w io.Writer, progress Progress) error {
	if len(rec.Audio) == 0 {
		return ErrNoStreams
	}
	m, err := newMixer(rec)
	if err != nil {
		return err
	}
	defer m.Close()
	data := uint32(m.Frames() * Frame * 2)
	// RIFF/WAVE with one PCM "fmt " chunk and the "data" chunk.
	h := make([]byte, 44)
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], 36+data)
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], 1) // PCM
	binary.LittleEndian.PutUint16(h[22:], 1) // mono
	binary.LittleEndian.PutUint32(h[24:], Rate)
	binary.LittleEndian.PutUint32(h[28:], Rate*2)
	binary.LittleEndian.PutUint16(h[32:], 2)
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], data)
	if _, err := w.Write(h); err != nil {
		return err
	}
	out := make([]byte, Frame*2)
	for {
		frame, at, err := m.Next()
		if errors.Is(err, io.EOF) {
			progress(rec.Duration, rec.Duration)
			return nil
		}
		if err != nil {
			return err
		}
		for i, s := range frame {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(s))
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		report(progress, at, rec.Duration)
	}
}

// opusFrames encodes the mix to 20 ms Opus frames.
type opusFrames struct {
	m   *mixer
	enc codec.Encoder
	out []byte
}

func newOpusFrames(rec *Recording) (*opusFrames, error) {
	m, err := newMixer(rec)
	if err != nil {
		return nil, err
	}
	enc, err := codec.NewEncoder(codec.Opus)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &opusFrames{m: m, enc: enc, out: make([]byte, 1500)}, nil
}

// Next returns the next encoded frame (valid until the next call) and
// its time, io.EOF after the last.
func (o *opusFrames) Next() ([]byte, time.Duration, error) {
	frame, at, err := o.m.Next()
	if err != nil {
		return nil, 0, err
	}
	n, err := o.enc.Encode(frame, o.out)
	if err != nil {
		return nil, 0, err
	}
	return o.out[:n], at, nil
}

func (o *opusFrames) Close() { o.m.Close() }

func (rec *Recording) writeOgg(w io.Writer, progress Progress) error {
	if len(rec.Audio) == 0 {
		return ErrNoStreams
	}
	o, err := newOpusFrames(rec)
	if err != nil {
		return err
	}
	defer o.Close()
	ow, err := oggwriter.NewWith(w, Rate, 1)
	if err != nil {
		return err
	}
	pkt := &rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: codec.Opus.PT, SSRC: 1}}
	for {
		b, at, err := o.Next()
		if errors.Is(err, io.EOF) {
			progress(rec.Duration, rec.Duration)
			return ow.Close()
		}
		if err != nil {
			return err
		}
		// The writer's granule positions follow the RTP timestamps.
		pkt.SequenceNumber++
		pkt.Timestamp = uint32(at * Rate / time.Second)
		pkt.Payload = b
		if err := ow.WriteRTP(pkt); err != nil {
			return err
		}
		report(progress, at, rec.Duration)
	}
}

// opusPreSkip is libopus' encoder delay at 48 kHz (2.5 ms look-ahead plus
// 4 ms delay compensation): decoders drop it, which keeps the audio in
// step with the video.
const opusPreSkip = 312

// opusHead is the OpusHead of RFC 7845 §5.1 for a mono stream.
func opusHead() []byte {
	h := make([]byte, 19)
	copy(h, "OpusHead")
	h[8] = 1 // version
	h[9] = 1 // channels
	binary.LittleEndian.PutUint16(h[10:], opusPreSkip)
	binary.LittleEndian.PutUint32(h[12:], Rate)
	return h
}

// nopCloser keeps ebml-go, which closes its writer, from closing ours.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (rec *Recording) writeWebM(w io.Writer, progress Progress) error {
	vs := vp8Streams(rec)
	if len(vs) == 0 && len(rec.Audio) == 0 {
		return ErrNoStreams
	}
	var tracks []webm.TrackEntry
	video, width, height, err := vp8Picture(vs)
	if err != nil {
		return err
	}
	if video != nil {
		defer video.Close()
		tracks = append(tracks, webm.TrackEntry{Name: "video", TrackNumber: uint64(len(tracks) + 1),
			TrackUID: uint64(len(tracks) + 1), CodecID: "V_VP8", TrackType: 1,
			Video: &webm.Video{PixelWidth: uint64(width), PixelHeight: uint64(height)}})
	}
	var sound *opusFrames
	if len(rec.Audio) > 0 {
		var err error
		if sound, err = newOpusFrames(rec); err != nil {
			return err
		}
		defer sound.Close()
		tracks = append(tracks, webm.TrackEntry{Name: "audio", TrackNumber: uint64(len(tracks) + 1),
			TrackUID: uint64(len(tracks) + 1), CodecID: "A_OPUS", TrackType: 2,
			CodecPrivate: opusHead(), CodecDelay: opusPreSkip * uint64(time.Second) / Rate,
			SeekPreRoll: uint64(80 * time.Millisecond),
			Audio:       &webm.Audio{SamplingFrequency: Rate, Channels: 1}})
	}
	if len(tracks) == 0 {
		return ErrNoStreams
	}
	info := *webm.DefaultSegmentInfo
	info.MuxingApp, info.WritingApp = "convene", "convene"
	info.Duration = float64(rec.Duration / time.Millisecond)
	ws, err := webm.NewSimpleBlockWriter(nopCloser{w}, tracks,
		mkvcore.WithSegmentInfo(&info), mkvcore.WithSeekHead(true),
		// Frames come sorted from here; the library need not hold any back.
		mkvcore.WithBlockInterceptor(nil))
	if err != nil {
		return fmt.Errorf("export: webm: %w", err)
	}
	defer func() {
		for _, bw := range ws {
			bw.Close()
		}
	}()
	vw, aw := ws[0], ws[len(ws)-1]
	// Interleave by time: the next video frame and the next audio frame,
	// whichever comes first.
	var vf []byte
	var vat time.Duration
	var vkey bool
	vdone := video == nil
	nextVideo := func() error {
		f, at, key, err := video.Next()
		if errors.Is(err, io.EOF) {
			vdone = true
			return nil
		}
		vf, vat, vkey = f, at, key
		return err
	}
	var af []byte
	var aat time.Duration
	adone := sound == nil
	nextAudio := func() error {
		f, at, err := sound.Next()
		if errors.Is(err, io.EOF) {
			adone = true
			return nil
		}
		af, aat = f, at
		return err
	}
	if !vdone {
		if err := nextVideo(); err != nil {
			return err
		}
	}
	if !adone {
		if err := nextAudio(); err != nil {
			return err
		}
	}
	tick := reporter(progress, rec.Duration)
	for !vdone || !adone {
		if !vdone && (adone || vat <= aat) {
			tick(vat)
			// The writer keeps the slice until its goroutine has written
			// it: hand it a copy.
			if _, err := vw.Write(vkey, int64(vat/time.Millisecond), bytes.Clone(vf)); err != nil {
				return err
			}
			if err := nextVideo(); err != nil {
				return err
			}
			continue
		}
		if _, err := aw.Write(true, int64(aat/time.Millisecond), bytes.Clone(af)); err != nil {
			return err
		}
		tick(aat)
		if err := nextAudio(); err != nil {
			return err
		}
	}
	progress(rec.Duration, rec.Duration)
	return nil
}
