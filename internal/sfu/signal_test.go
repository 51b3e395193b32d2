package sfu

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	good := []string{
		`{"type":"offer","pc":"pub","sdp":"v=0\r\n","sources":{"0":"microphone","1":"camera"}}`,
		`{"type":"answer","pc":"sub","sdp":"v=0\r\n"}`,
		`{"type":"candidate","pc":"pub","candidate":{"candidate":"candidate:1 1 udp 1 127.0.0.1 9 typ host"}}`,
		`{"type":"layer","track":"m_1-camera-video","layer":"low"}`,
		`{"type":"layer","track":"m_1-camera-video","layer":"auto"}`,
		`{"type":"mute","kind":"audio","muted":true}`,
		`{"type":"leave"}`,
	}
	for _, s := range good {
		if _, err := Decode([]byte(s)); err != nil {
			t.Errorf("Decode(%s): %v", s, err)
		}
	}
	bad := []string{
		``, `null`, `[]`, `"offer"`, `{"type":1}`, `{"type":"explode"}`,
		`{"type":"offer","pc":"sub","sdp":"v=0"}`,
		`{"type":"offer","pc":"pub","sdp":"hello"}`,
		`{"type":"offer","pc":"pub","sdp":"v=0","sources":{"0":"toaster"}}`,
		`{"type":"answer","pc":"pub","sdp":"v=0"}`,
		`{"type":"candidate","pc":"pub"}`,
		`{"type":"layer","track":"x","layer":"ultra"}`,
		`{"type":"layer","layer":"low"}`,
		`{"type":"mute","kind":"smell","muted":true}`,
		`{"type":"mute","kind":"audio"}`,
	}
	for _, s := range bad {
		if _, err := Decode([]byte(s)); !errors.Is(err, ErrBadFrame) {
			t.Errorf("Decode(%s) = %v, want ErrBadFrame", s, err)
		}
	}
	if _, err := Decode(make([]byte, MaxFrame+1)); !errors.Is(err, ErrBadFrame) {
		t.Error("an oversized frame decodes")
	}
}

// FuzzDecode: whatever a client sends, Decode returns a frame of a known
// type with its required fields, or ErrBadFrame; it never panics.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"offer","pc":"pub","sdp":"v=0\r\n","sources":{"0":"camera"}}`,
		`{"type":"answer","pc":"sub","sdp":"v=0"}`,
		`{"type":"candidate","pc":"sub","candidate":{"candidate":"c","sdpMid":"0","sdpMLineIndex":0}}`,
		`{"type":"layer","track":"t","layer":"mid"}`,
		`{"type":"mute","kind":"video","muted":false}`,
		`{"type":"leave"}`, `{`, `{"type":"offer","sources":{"0":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v is not ErrBadFrame", err)
			}
			return
		}
		switch fr.Type {
		case "offer", "answer":
			if len(fr.SDP) < 3 || fr.SDP[:3] != "v=0" {
				t.Fatalf("%s without an SDP: %+v", fr.Type, fr)
			}
		case "candidate":
			if fr.Candidate == nil {
				t.Fatal("candidate without a candidate")
			}
		case "layer":
			if _, ok := parseLayer(fr.Layer); !ok || fr.Track == "" {
				t.Fatalf("bad layer frame accepted: %+v", fr)
			}
		case "mute":
			if fr.Muted == nil {
				t.Fatal("mute without muted")
			}
		case "leave":
		default:
			t.Fatalf("unknown type %q accepted", fr.Type)
		}
	})
}

func TestKeyframeDetection(t *testing.T) {
	cases := []struct {
		mime string
		b    []byte
		want bool
	}{
		{"video/VP8", []byte{0x10, 0x00}, true},                    // S, PID 0, P=0
		{"video/VP8", []byte{0x10, 0x01}, false},                   // inter frame
		{"video/VP8", []byte{0x00, 0x00}, false},                   // not a partition start
		{"video/VP8", []byte{0x90, 0x80, 0x81, 0x23, 0x00}, true},  // X, I with a 15-bit picture ID
		{"video/VP8", []byte{0x90, 0x80}, false},                   // cut short
		{"video/H264", []byte{0x65}, true},                         // IDR
		{"video/H264", []byte{0x41}, false},                        // non-IDR slice
		{"video/H264", []byte{0x7c, 0x85}, true},                   // FU-A start of an IDR
		{"video/H264", []byte{0x7c, 0x05}, false},                  // FU-A middle
		{"video/H264", []byte{0x78, 0x00, 0x02, 0x67, 0x42}, true}, // STAP-A with an SPS
		{"video/VP8", nil, false},
	}
	for _, c := range cases {
		if got := keyframe(c.mime, c.b); got != c.want {
			t.Errorf("keyframe(%s, %x) = %v, want %v", c.mime, c.b, got, c.want)
		}
	}
}

func FuzzKeyframe(f *testing.F) {
	f.Add([]byte{0x90, 0xe0, 0x81, 0x23, 0x01, 0x02, 0x00})
	f.Add([]byte{0x78, 0x00, 0x02, 0x67, 0x42})
	f.Fuzz(func(t *testing.T, b []byte) {
		keyframe("video/VP8", b)
		keyframe("video/H264", b)
		audioLevel(b, 1)
	})
}

func TestAudioLevel(t *testing.T) {
	// RTP header with a one-byte extension: ID 1, one byte, level 30 with
	// the voice bit.
	b := []byte{0x90, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0xbe, 0xde, 0, 1, 0x10, 0x80 | 30, 0, 0, 0xff}
	if lv, ok := audioLevel(b, 1); !ok || lv != 30 {
		t.Fatalf("audioLevel = %d %v, want 30", lv, ok)
	}
	if _, ok := audioLevel(b, 2); ok {
		t.Fatal("found an extension that is not there")
	}
	if _, ok := audioLevel(b[:14], 1); ok {
		t.Fatal("read past a cut extension")
	}
}

func TestLayerOf(t *testing.T) {
	for _, c := range []struct {
		rid     string
		all     []string
		layer   int
		primary bool
	}{
		{"", nil, 0, true},
		{"l", []string{"l", "m", "h"}, 1, false},
		{"h", []string{"l", "m", "h"}, 3, true},
		{"h", []string{"q", "h", "f"}, 2, false},
		{"f", []string{"q", "h", "f"}, 3, true},
		{"b", []string{"a", "b"}, 2, true},
	} {
		l, p := layerOf(c.rid, c.all)
		if l != c.layer || p != c.primary {
			t.Errorf("layerOf(%q, %v) = %d %v, want %d %v", c.rid, c.all, l, p, c.layer, c.primary)
		}
	}
}
