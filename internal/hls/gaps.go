package hls

import (
	"bytes"
	"strconv"
	"strings"
)

// gohlslib's LL-HLS media playlists open, for the stream's first seven
// segments, with seven EXT-X-GAP entries (gap.mp4): Apple's players need
// a playlist that long to start. Players that do not know EXT-X-GAP fetch
// gap.mp4, get 404, and stop there (VLC 3.0 stays at position 0); every
// player but Apple's gets the playlists without them.

// appleNative tells whether a User-Agent is Apple's own HLS player
// (AVPlayer, Safari's native playback), which gets the gaps.
func appleNative(ua string) bool {
	if strings.Contains(ua, "AppleCoreMedia") || strings.Contains(ua, "iPhone") || strings.Contains(ua, "iPad") {
		return true
	}
	return strings.Contains(ua, "Safari/") && !strings.Contains(ua, "Chrome/") && !strings.Contains(ua, "Chromium/") &&
		!strings.Contains(ua, "Android")
}

// stripGaps removes a media playlist's leading gap entries (EXT-X-GAP,
// its EXTINF and its URI), moving EXT-X-MEDIA-SEQUENCE past them so every
// other segment keeps its number. A playlist with no leading gap, a delta
// update (EXT-X-SKIP) or one it cannot read comes back as it was.
func stripGaps(pl []byte) []byte {
	if !bytes.Contains(pl, []byte("#EXT-X-GAP")) || bytes.Contains(pl, []byte("#EXT-X-SKIP")) {
		return pl
	}
	lines := strings.Split(string(pl), "\n")
	seqAt, seq := -1, 0
	out := make([]string, 0, len(lines))
	gaps := 0
	segments := false // a segment other than a gap came
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if v, ok := strings.CutPrefix(l, "#EXT-X-MEDIA-SEQUENCE:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return pl
			}
			seqAt, seq = len(out), n
		}
		if !segments && l == "#EXT-X-GAP" {
			// The gap's EXTINF, then its URI.
			if i+2 >= len(lines) || !strings.HasPrefix(lines[i+1], "#EXTINF:") || strings.HasPrefix(lines[i+2], "#") {
				return pl
			}
			gaps++
			i += 2
			continue
		}
		if l != "" && !strings.HasPrefix(l, "#") {
			segments = true
		}
		out = append(out, l)
	}
	if gaps == 0 || seqAt < 0 {
		return pl
	}
	out[seqAt] = "#EXT-X-MEDIA-SEQUENCE:" + strconv.Itoa(seq+gaps)
	return []byte(strings.Join(out, "\n"))
}
