package composite

import (
	"strings"
	"testing"
)

// TestCells: every layout's cells are even-sized, inside the picture and
// do not overlap.
func TestCells(t *testing.T) {
	for _, tc := range []struct {
		layout string
		w, h   int
		n      int
	}{{Grid2, 640, 360, 4}, {Grid3, 640, 360, 9}, {Speaker, 640, 360, 5}, {Grid3, 1280, 720, 9}, {Speaker, 322, 182, 5}} {
		cells, ok := Cells(tc.layout, tc.w, tc.h)
		if !ok || len(cells) != tc.n {
			t.Fatalf("%s: %d cells (%v), want %d", tc.layout, len(cells), ok, tc.n)
		}
		for i, a := range cells {
			if a.W%2 != 0 || a.H%2 != 0 || a.W <= 0 || a.H <= 0 || a.X+a.W > tc.w || a.Y+a.H > tc.h {
				t.Errorf("%s %dx%d: cell %d %+v", tc.layout, tc.w, tc.h, i, a)
			}
			for j, b := range cells[:i] {
				if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
					t.Errorf("%s: cells %d %+v and %d %+v overlap", tc.layout, j, b, i, a)
				}
			}
		}
	}
	if _, ok := Cells("grid4", 640, 360); ok {
		t.Error("an unknown layout has cells")
	}
}

// TestGraph: inputs go to their cells with their names, empty cells are
// black, and a picture with no input at all is paced by realtime.
func TestGraph(t *testing.T) {
	cells, _ := Cells(Grid2, 640, 360)
	g := Graph(cells, []Cell{{Input: 0, NameFile: "/d/name0.txt"}, {Input: -1}, {Input: 1}}, 640, 360, 15, "/f/a:b.ttf")
	for _, want := range []string{
		"[0:0]fps=15,scale=320:180:",
		"drawtext=fontfile=/f/a\\\\:b.ttf:textfile=/d/name0.txt:expansion=none",
		"color=c=black:s=320x180:r=15[c1];",
		"[0:1]fps=15,scale=320:180:",
		"color=c=black:s=320x180:r=15[c3];",
		"[c0][c1][c2][c3]xstack=inputs=4:layout=0_0|320_0|0_180|320_180:fill=black,pad=640:360:0:0:black,format=yuv420p[out]",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("graph lacks %q:\n%s", want, g)
		}
	}
	if strings.Contains(g, "realtime") {
		t.Error("a graph with inputs is paced by realtime")
	}
	if g := Graph(cells, nil, 640, 360, 15, ""); !strings.HasSuffix(g, ",realtime[out]") {
		t.Errorf("a graph without inputs: %s", g)
	}
}

// TestEscape: a path is quoted for its option and again for the graph
// (checked against ffmpeg 5.1 with a font and a name file in a directory
// called "we:ird,d[i]r's").
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b.txt": "/a/b.txt",
		"/a:b":     `/a\\:b`,
		"/a,b[c]":  `/a\,b\[c\]`,
		"/it's":    `/it\\\'s`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLabel(t *testing.T) {
	if got := label("Ada\nLovelace\x00"); got != "Ada Lovelace " {
		t.Errorf("label: %q", got)
	}
	if got := []rune(label(strings.Repeat("é", 40))); len(got) != 32 || got[31] != '…' {
		t.Errorf("a long name: %q", string(got))
	}
}

func TestRequestDefaults(t *testing.T) {
	r := Request{}
	if err := r.normalize(); err != nil || r.Layout != Grid2 || r.Codec != VP8 || r.Width != 640 || r.Height != 360 || r.FPS != 15 {
		t.Errorf("defaults: %+v %v", r, err)
	}
	for _, bad := range []Request{{Layout: "grid4"}, {Codec: "AV1"}, {Width: 641}, {Height: 4000}, {FPS: 60},
		{Tracks: []string{"a", "b", "c", "d", "e"}}, {Tracks: []string{""}}} {
		if err := bad.normalize(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	h := Request{Layout: Speaker, Codec: "h264"}
	if err := h.normalize(); err != nil || h.Codec != H264 {
		t.Errorf("h264: %+v %v", h, err)
	}
}
