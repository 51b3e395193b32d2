package codec

import (
	"fmt"

	"gopkg.in/hraban/opus.v2"
)

// Opus runs at 48 kHz, mono, 20 ms frames for voice; a decoder downmixes
// a stereo stream.
type opusDecoder struct{ d *opus.Decoder }

func newOpusDecoder() (*opusDecoder, error) {
	d, err := opus.NewDecoder(48000, 1)
	if err != nil {
		return nil, fmt.Errorf("codec: opus decoder: %w", err)
	}
	return &opusDecoder{d: d}, nil
}

func (o *opusDecoder) Decode(p []byte, pcm []int16) (int, error) {
	if len(p) == 0 {
		return 0, fmt.Errorf("codec: empty opus payload")
	}
	n, err := o.d.Decode(p, pcm)
	if err != nil {
		return 0, fmt.Errorf("codec: opus: %w", err)
	}
	return n, nil
}

type opusEncoder struct{ e *opus.Encoder }

func newOpusEncoder() (*opusEncoder, error) {
	e, err := opus.NewEncoder(48000, 1, opus.AppVoIP)
	if err != nil {
		return nil, fmt.Errorf("codec: opus encoder: %w", err)
	}
	// A conference's voice: 32 kbit/s, in-band FEC for a lossy link.
	_ = e.SetBitrate(32000)
	_ = e.SetInBandFEC(true)
	_ = e.SetPacketLossPerc(5)
	_ = e.SetComplexity(5)
	return &opusEncoder{e: e}, nil
}

func (o *opusEncoder) Encode(pcm []int16, out []byte) (int, error) {
	n, err := o.e.Encode(pcm, out)
	if err != nil {
		return 0, fmt.Errorf("codec: opus: %w", err)
	}
	return n, nil
}
