package main

// plot.go: the Go/Rust ratio bar chart (docs/bench/go-ratios.png), drawn
// with the standard library alone (image, image/png) and a built-in 3x5
// pixel font, so the benchmark needs no plotting module. One group of bars
// per workload and size, one bar per setup; a line marks 1.0 (parity) and
// a dashed line 1.5 (the target). Ratios above the axis are
// clipped and keep their printed value.

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
)

// glyphs: 5 rows of 3 pixels, "#" set.
var glyphs = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"}, '3': {"###", "..#", "###", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"}, '7': {"###", "..#", "..#", "..#", "..#"},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "###"},
	'A': {"###", "#.#", "###", "#.#", "#.#"}, 'B': {"##.", "#.#", "##.", "#.#", "##."},
	'C': {"###", "#..", "#..", "#..", "###"}, 'D': {"##.", "#.#", "#.#", "#.#", "##."},
	'E': {"###", "#..", "##.", "#..", "###"}, 'F': {"###", "#..", "##.", "#..", "#.."},
	'G': {"###", "#..", "#.#", "#.#", "###"}, 'H': {"#.#", "#.#", "###", "#.#", "#.#"},
	'I': {"###", ".#.", ".#.", ".#.", "###"}, 'J': {"..#", "..#", "..#", "#.#", "###"},
	'K': {"#.#", "#.#", "##.", "#.#", "#.#"}, 'L': {"#..", "#..", "#..", "#..", "###"},
	'M': {"#.#", "###", "###", "#.#", "#.#"}, 'N': {"##.", "#.#", "#.#", "#.#", "#.#"},
	'O': {"###", "#.#", "#.#", "#.#", "###"}, 'P': {"###", "#.#", "###", "#..", "#.."},
	'Q': {"###", "#.#", "#.#", "###", "..#"}, 'R': {"###", "#.#", "##.", "#.#", "#.#"},
	'S': {"###", "#..", "###", "..#", "###"}, 'T': {"###", ".#.", ".#.", ".#.", ".#."},
	'U': {"#.#", "#.#", "#.#", "#.#", "###"}, 'V': {"#.#", "#.#", "#.#", "#.#", ".#."},
	'W': {"#.#", "#.#", "###", "###", "#.#"}, 'X': {"#.#", "#.#", ".#.", "#.#", "#.#"},
	'Y': {"#.#", "#.#", ".#.", ".#.", ".#."}, 'Z': {"###", "..#", ".#.", "#..", "###"},
	'-': {"...", "...", "###", "...", "..."}, '.': {"...", "...", "...", "...", ".#."},
	'/': {"..#", "..#", ".#.", "#..", "#.."}, '=': {"...", "###", "...", "###", "..."},
	'(': {".#.", "#..", "#..", "#..", ".#."}, ')': {".#.", "..#", "..#", "..#", ".#."},
	'^': {".#.", "#.#", "...", "...", "..."}, ':': {"...", ".#.", "...", ".#.", "..."},
	',': {"...", "...", "...", ".#.", "#.."},
}

type canvas struct{ *image.RGBA }

func (c canvas) rect(x0, y0, x1, y1 int, col color.Color) {
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			c.Set(x, y, col)
		}
	}
}

// text draws s at (x, y) with pixels scale wide; lower case as upper.
func (c canvas) text(x, y, scale int, s string, col color.Color) {
	for _, r := range strings.ToUpper(s) {
		g := glyphs[r]
		for row, line := range g {
			for i, ch := range line {
				if ch == '#' {
					c.rect(x+i*scale, y+row*scale, x+(i+1)*scale, y+(row+1)*scale, col)
				}
			}
		}
		x += 4 * scale
	}
}

// ratioSeries is one setup's Go/Rust ratios, one per group (<= 0: none).
type ratioSeries struct {
	name   string
	col    color.RGBA
	ratios []float64
}

// plotRatios writes the grouped bar chart to path.
func plotRatios(path, title string, groups []string, series []ratioSeries) error {
	const w, h, left, top, bottom, maxR = 1000, 520, 60, 60, 90, 4.0
	c := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	c.rect(0, 0, w, h, color.White)
	black, grey := color.RGBA{0, 0, 0, 255}, color.RGBA{170, 170, 170, 255}
	plotH := h - top - bottom
	yOf := func(r float64) int { return top + plotH - int(min(r, maxR)/maxR*float64(plotH)) }
	c.text(left, 15, 3, title, black)
	for r := 0.0; r <= maxR; r += 0.5 {
		c.rect(left, yOf(r), w-20, yOf(r)+1, color.RGBA{230, 230, 230, 255})
		c.text(15, yOf(r)-5, 2, trimRatio(r), black)
	}
	c.rect(left, yOf(1), w-20, yOf(1)+2, black)
	for x := left; x < w-20; x += 12 {
		c.rect(x, yOf(1.5), x+6, yOf(1.5)+2, grey)
	}
	groupW := (w - 20 - left) / max(len(groups), 1)
	barW := (groupW - 20) / max(len(series), 1)
	for g, name := range groups {
		x0 := left + g*groupW + 10
		for s, ser := range series {
			if g < len(ser.ratios) && ser.ratios[g] > 0 {
				x := x0 + s*barW
				c.rect(x, yOf(ser.ratios[g]), x+barW-3, yOf(0), ser.col)
				c.text(x, yOf(ser.ratios[g])-14, 2, trimRatio(ser.ratios[g]), black)
			}
		}
		c.text(x0, h-bottom+10, 2, name, black)
	}
	for s, ser := range series {
		x := left + s*200
		c.rect(x, h-35, x+20, h-20, ser.col)
		c.text(x+28, h-32, 2, ser.name, black)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func trimRatio(r float64) string {
	s := strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", r), "0"), ".")
	if s == "" {
		return "0"
	}
	return s
}
