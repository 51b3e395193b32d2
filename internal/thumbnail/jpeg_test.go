package thumbnail

import (
	"bufio"
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"testing"
)

func testJPEG(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 13), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestNextJPEG: images one after another, with noise before the first,
// come out whole.
func TestNextJPEG(t *testing.T) {
	a, b := testJPEG(t, 64, 48), testJPEG(t, 320, 240)
	stream := append(append(append([]byte{0x00, 0xff, 0x12}, a...), b...), a...)
	br := bufio.NewReader(bytes.NewReader(stream))
	for i, want := range [][]byte{a, b, a} {
		got, err := nextJPEG(br)
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("image %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
	if _, err := nextJPEG(br); err != io.EOF {
		t.Errorf("after the last: %v, want EOF", err)
	}
}

// FuzzNextJPEG: whatever a child writes, the reader returns images,
// errBadJPEG or an I/O error, and never more than it was given.
func FuzzNextJPEG(f *testing.F) {
	f.Add(testJPEG(f, 8, 8))
	f.Add([]byte{0xff, 0xd8, 0xff, 0xda, 0x00, 0x02, 0xff, 0x00, 0xff, 0xd9})
	f.Add([]byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		total := 0
		for i := 0; i < 100; i++ {
			img, err := nextJPEG(br)
			if err != nil && !errors.Is(err, errBadJPEG) {
				return
			}
			total += len(img)
			if total > len(data) {
				t.Fatalf("%d bytes of images from %d", total, len(data))
			}
		}
	})
}
