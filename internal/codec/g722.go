package codec

// #cgo pkg-config: spandsp
// #include <spandsp.h>
import "C"

import (
	"errors"
	"runtime"
	"unsafe"
)

// G.722 (ITU-T G.722, 64 kbit/s, 16 kHz wideband speech) through cgo to
// spandsp's codec (Debian's libspandsp, the codec Asterisk and FreeSWITCH
// use). One byte codes two samples. RFC 3551 §4.5.2: its RTP clock runs at
// 8000 Hz although it samples at 16 kHz (Spec.Clock), so a 20 ms packet
// is 160 bytes, 320 samples, and advances the timestamp by 160.
//
// Both directions keep state (ADPCM predictors): each stream needs its own
// decoder and encoder. The C state is freed when the Go value is collected.

type g722Decoder struct{ s *C.g722_decode_state_t }

func newG722Decoder() (*g722Decoder, error) {
	s := C.g722_decode_init(nil, 64000, 0)
	if s == nil {
		return nil, errors.New("codec: g722 decoder: spandsp refused to make one")
	}
	d := &g722Decoder{s: s}
	runtime.SetFinalizer(d, func(d *g722Decoder) { C.g722_decode_free(d.s) })
	return d, nil
}

// Decode writes two samples per payload byte; pcm must hold them.
func (d *g722Decoder) Decode(p []byte, pcm []int16) (int, error) {
	if len(p) == 0 {
		return 0, errors.New("codec: empty g722 payload")
	}
	if 2*len(p) > len(pcm) {
		return 0, errors.New("codec: g722 payload longer than the frame buffer")
	}
	n := C.g722_decode(d.s, (*C.int16_t)(unsafe.Pointer(&pcm[0])), (*C.uint8_t)(unsafe.Pointer(&p[0])), C.int(len(p)))
	runtime.KeepAlive(d)
	return int(n), nil
}

type g722Encoder struct{ s *C.g722_encode_state_t }

func newG722Encoder() (*g722Encoder, error) {
	s := C.g722_encode_init(nil, 64000, 0)
	if s == nil {
		return nil, errors.New("codec: g722 encoder: spandsp refused to make one")
	}
	e := &g722Encoder{s: s}
	runtime.SetFinalizer(e, func(e *g722Encoder) { C.g722_encode_free(e.s) })
	return e, nil
}

// Encode writes one byte per two samples; out must hold them.
func (e *g722Encoder) Encode(pcm []int16, out []byte) (int, error) {
	if len(pcm) == 0 || len(pcm)%2 != 0 {
		return 0, errors.New("codec: g722 encodes an even number of samples")
	}
	if len(out) < len(pcm)/2 {
		return 0, errors.New("codec: g722 output buffer too small")
	}
	n := C.g722_encode(e.s, (*C.uint8_t)(unsafe.Pointer(&out[0])), (*C.int16_t)(unsafe.Pointer(&pcm[0])), C.int(len(pcm)))
	runtime.KeepAlive(e)
	return int(n), nil
}
