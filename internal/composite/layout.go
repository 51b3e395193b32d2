package composite

import (
	"fmt"
	"strconv"
	"strings"
)

// Layouts.
const (
	Grid2   = "grid2"   // 2×2 cells of equal size
	Grid3   = "grid3"   // 3×3 cells of equal size
	Speaker = "speaker" // the first cell large above a row of four small
)

// Rect is a cell of the picture, in pixels.
type Rect struct{ X, Y, W, H int }

// even rounds n down to an even number: 4:2:0 chroma needs it.
func even(n int) int { return n &^ 1 }

// Cells are a layout's cells in a w×h picture, in the order inputs fill
// them; ok is false for an unknown layout.
func Cells(layout string, w, h int) (cells []Rect, ok bool) {
	grid := func(n int) []Rect {
		cw, ch := even(w/n), even(h/n)
		for r := range n {
			for c := range n {
				cells = append(cells, Rect{c * cw, r * ch, cw, ch})
			}
		}
		return cells
	}
	switch layout {
	case Grid2:
		return grid(2), true
	case Grid3:
		return grid(3), true
	case Speaker:
		bh := even(h * 3 / 4)
		cells = append(cells, Rect{0, 0, even(w), bh})
		sw, sh := even(w/4), even(h-bh)
		for c := range 4 {
			cells = append(cells, Rect{c * sw, bh, sw, sh})
		}
		return cells, true
	}
	return nil, false
}

// Cell is one cell's content in a child's filter graph: the SDP's m-line
// index that feeds it (-1: black), and the file its name is read from
// ("" for none).
type Cell struct {
	Input    int
	NameFile string
}

// Graph is the child's -filter_complex: every input scaled into its cell
// (aspect kept, black bars) at fps frames/s with its name, empty cells
// black, all stacked into a w×h picture labelled [out]. With no input at
// all the black cells are paced at real time (nothing else paces them).
func Graph(cells []Rect, content []Cell, w, h, fps int, font string) string {
	var b strings.Builder
	var layout []string
	live := false
	for i, r := range cells {
		c := Cell{Input: -1}
		if i < len(content) {
			c = content[i]
		}
		if c.Input < 0 {
			fmt.Fprintf(&b, "color=c=black:s=%dx%d:r=%d[c%d];", r.W, r.H, fps, i)
		} else {
			live = true
			fmt.Fprintf(&b, "[0:%d]fps=%d,scale=%d:%d:force_original_aspect_ratio=decrease:force_divisible_by=2,"+
				"pad=%d:%d:(ow-iw)/2:(oh-ih)/2,setsar=1", c.Input, fps, r.W, r.H, r.W, r.H)
			if c.NameFile != "" {
				fmt.Fprintf(&b, ",drawtext=%s:textfile=%s:expansion=none:fontsize=%d:fontcolor=white:box=1:boxcolor=black@0.5:boxborderw=3:x=6:y=h-th-8",
					fontOption(font), escape(c.NameFile), max(10, r.H/12))
			}
			fmt.Fprintf(&b, "[c%d];", i)
		}
		layout = append(layout, strconv.Itoa(r.X)+"_"+strconv.Itoa(r.Y))
	}
	for i := range cells {
		fmt.Fprintf(&b, "[c%d]", i)
	}
	fmt.Fprintf(&b, "xstack=inputs=%d:layout=%s:fill=black,pad=%d:%d:0:0:black,format=yuv420p",
		len(cells), strings.Join(layout, "|"), w, h)
	if !live {
		b.WriteString(",realtime")
	}
	b.WriteString("[out]")
	return b.String()
}

// fontOption names drawtext's font: a file, else fontconfig's Sans.
func fontOption(file string) string {
	if file == "" {
		return "font=Sans"
	}
	return "fontfile=" + escape(file)
}

// escape quotes a path for a filter option inside a filter graph: once
// for the option's value (\ ' :), once for the graph (\ ' [ ] , ;).
func escape(s string) string {
	r1 := strings.NewReplacer(`\`, `\\`, `'`, `\'`, `:`, `\:`)
	r2 := strings.NewReplacer(`\`, `\\`, `'`, `\'`, `[`, `\[`, `]`, `\]`, `,`, `\,`, `;`, `\;`)
	return r2.Replace(r1.Replace(s))
}
