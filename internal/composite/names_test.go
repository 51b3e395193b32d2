package composite

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/convene/convene/internal/testutil"
)

// FuzzLabel: whatever a member calls itself, a cell's name is valid
// UTF-8, one line of printable characters, at most 32 of them, and
// labelling it again changes nothing.
func FuzzLabel(f *testing.F) {
	for _, s := range []string{"Ada", "%{pts}", "a:b\\c'd[x];y,z", "Ada\nLovelace\r\t", "\u202egnp.exe", "\xff\xfe", strings.Repeat("é", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		l := label(name)
		if !utf8.ValidString(l) {
			t.Fatalf("label(%q) = %q: not UTF-8", name, l)
		}
		if n := utf8.RuneCountInString(l); n > 32 {
			t.Fatalf("label(%q) has %d characters", name, n)
		}
		for _, r := range l {
			if !unicode.IsPrint(r) {
				t.Fatalf("label(%q) = %q has %U", name, l, r)
			}
		}
		if again := label(l); again != l {
			t.Fatalf("label(label(%q)) = %q, not %q", name, again, l)
		}
	})
}

// cellColours are the lavfi colours render fills the cells with, as rgb.
var cellColours = [][3]byte{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 0}}

// render has ffmpeg draw Graph's 2×2 picture (320×180) of four solid
// colours, cell i named names[i] the way a composite names it (label, a
// file read with textfile), from a directory whose name needs quoting in
// a filter graph; it returns the picture as rgb24.
func render(t *testing.T, names []string) []byte {
	t.Helper()
	bin := testutil.NeedBinary(t, "ffmpeg")
	const w, h = 320, 180
	dir := filepath.Join(t.TempDir(), "we:ird,d[i]r's")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	cells, _ := Cells(Grid2, w, h)
	var src []string
	content := make([]Cell, len(cells))
	for i, c := range cellColours {
		src = append(src, fmt.Sprintf("color=c=0x%02X%02X%02X:s=160x90:r=5[out%d]", c[0], c[1], c[2], i))
		content[i] = Cell{Input: i}
		if names[i] != "" {
			content[i].NameFile = filepath.Join(dir, "name"+strconv.Itoa(i)+".txt")
			if err := os.WriteFile(content[i].NameFile, []byte(label(names[i])), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	font := DefaultFont
	if _, err := os.Stat(font); err != nil {
		font = ""
	}
	cmd := exec.Command(bin, "-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi", "-i", strings.Join(src, ";"),
		"-filter_complex", Graph(cells, content, w, h, 5, font), "-map", "[out]", "-frames:v", "1",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || len(out) != w*h*3 {
		t.Fatalf("ffmpeg: %v, %d bytes: %s", err, len(out), stderr.String())
	}
	return out
}

// nameBox is the width of what is drawn over cell i's colour in its
// bottom fifth (0 for nothing), in a 320×180 rgb24 picture.
func nameBox(f []byte, i int) int {
	const w, cw, ch = 320, 160, 90
	x0, y0 := (i%2)*cw, (i/2)*ch
	left, right := cw, -1
	for y := y0 + ch*4/5; y < y0+ch-2; y++ {
		for x := 0; x < cw; x++ {
			o := ((y*w + x0 + x) * 3)
			for k := range 3 {
				if d := int(f[o+k]) - int(cellColours[i][k]); d > 60 || d < -60 {
					left, right = min(left, x), max(right, x)
				}
			}
		}
	}
	return max(0, right-left+1)
}

// TestNamesDrawn: ffmpeg draws each cell's name, read from a file in a
// directory that needs quoting, as it is: "%{n}" four times comes out as
// sixteen characters, not expanded to four zeros; quotes, colons,
// brackets, a new line, a right-to-left override and a long name neither
// break the filter graph nor go missing; a cell without a name has
// nothing drawn.
func TestNamesDrawn(t *testing.T) {
	f := render(t, []string{"%{n}%{n}%{n}%{n}", "0000", "a:b\\c'd [x];y,z\n\u202eevil " + strings.Repeat("x", 40), ""})
	boxes := []int{nameBox(f, 0), nameBox(f, 1), nameBox(f, 2), nameBox(f, 3)}
	t.Logf("name boxes %v px wide", boxes)
	if boxes[1] < 10 {
		t.Fatalf("no name drawn in cell 1: boxes %v", boxes)
	}
	if boxes[0] < 2*boxes[1] {
		t.Errorf("%q drawn %d px wide, %q %d: the text was expanded", "%{n}%{n}%{n}%{n}", boxes[0], "0000", boxes[1])
	}
	if boxes[2] < boxes[0] {
		t.Errorf("the long name with quotes and brackets drawn %d px wide, under %d", boxes[2], boxes[0])
	}
	if boxes[3] != 0 {
		t.Errorf("a cell without a name has %d px drawn", boxes[3])
	}
}
