package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // registers png
	_ "gonum.org/v1/plot/vg/vgsvg" // registers svg

	"github.com/f91dcac0/tributary/bench"
)

// plotFormat returns the image format named by path's extension: "svg" or
// "png".
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")); ext {
	case "svg", "png":
		return ext, nil
	default:
		return "", fmt.Errorf("-plot %q: want a .svg or .png file", path)
	}
}

// writePlot draws one panel per parallel scenario in rep: throughput
// (millions of units per second, all goroutines together) against
// GOMAXPROCS, one line per subject, each subject in the same colour and
// glyph in every panel.
func writePlot(path string, rep Report) error {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	var names []string
	byScenario := map[string][]Result{}
	for _, r := range rep.Results {
		if !r.Parallel || r.Failed {
			continue
		}
		if _, ok := byScenario[r.Scenario]; !ok {
			names = append(names, r.Scenario)
		}
		byScenario[r.Scenario] = append(byScenario[r.Scenario], r)
	}
	if len(names) == 0 {
		return fmt.Errorf("no parallel scenario was measured; nothing to plot")
	}
	style := map[string]int{} // subject → index into plotutil's palettes
	for i, k := range bench.Kinds() {
		style[k.Name] = i
	}

	const cols = 2
	rows := (len(names) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, name := range names {
		p := plot.New()
		unit := byScenario[name][0].Unit
		p.Title.Text = name
		p.X.Label.Text = "GOMAXPROCS"
		p.Y.Label.Text = fmt.Sprintf("M %s/s", bench.Plural(unit))
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		p.X.Tick.Marker = procsTicks(rep.Meta.CPUs)
		p.Add(plotter.NewGrid())
		top := 0.0
		for _, k := range bench.Kinds() {
			var xy plotter.XYs
			for _, r := range byScenario[name] {
				if r.Subject == k.Name {
					xy = append(xy, plotter.XY{X: float64(r.Procs), Y: r.UnitsPerSec / 1e6})
					top = max(top, r.UnitsPerSec/1e6)
				}
			}
			if len(xy) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			s := style[k.Name]
			line.Color, line.Dashes = plotutil.Color(s), plotutil.Dashes(s)
			points.Color, points.Shape = plotutil.Color(s), plotutil.Shape(s)
			p.Add(line, points)
			p.Legend.Add(k.Name, line, points)
		}
		p.Y.Max = 1.35 * top // headroom for the legend
		plots[i/cols][i%cols] = p
	}
	for i := len(names); i < rows*cols; i++ {
		empty := plot.New() // a blank panel fills the grid
		empty.HideAxes()
		plots[i/cols][i%cols] = empty
	}

	width, height := 10*vg.Inch, vg.Length(rows)*3.5*vg.Inch+0.5*vg.Inch
	c, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	title := fmt.Sprintf("Tributary: throughput against GOMAXPROCS — %d CPUs, %s, %s", rep.Meta.NumCPU, rep.Meta.CPUModel, rep.Meta.Date)
	ts := plots[0][0].Title.TextStyle
	ts.XAlign = draw.XCenter
	dc.FillText(ts, vg.Point{X: width / 2, Y: height - 0.3*vg.Inch}, title)
	dc.Max.Y -= 0.5 * vg.Inch
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Inch / 2, PadY: vg.Inch / 3, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for col := range plots[r] {
			plots[r][col].Draw(canvases[r][col])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// procsTicks marks exactly the measured GOMAXPROCS values.
func procsTicks(cpus []int) plot.Ticker {
	var ticks plot.ConstantTicks
	for _, n := range cpus {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	return ticks
}
