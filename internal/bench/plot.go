package bench

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a line plot.
type Series struct {
	Name string
	XY   plotter.XYs
	// Dashed draws a reference line (a baseline, a limit) without points.
	Dashed bool
}

// LinePlot is a plot of lines with points, saved as a PNG.
type LinePlot struct {
	File, Title, X, Y string
	Series            []Series
	LogX, LogY        bool
	// LegendLeft and LegendBottom move the legend out of the data's way
	// (default: top right).
	LegendLeft, LegendBottom bool
}

const plotW, plotH = 6 * vg.Inch, 4 * vg.Inch

// Save writes the plot to dir/File and returns the path.
func (lp LinePlot) Save(dir string) (string, error) {
	p := plot.New()
	p.Title.Text = lp.Title
	p.X.Label.Text = lp.X
	p.Y.Label.Text = lp.Y
	p.Add(plotter.NewGrid())
	if lp.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if lp.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, s := range lp.Series {
		if len(s.XY) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.XY)
		if err != nil {
			return "", fmt.Errorf("plot %s, series %s: %w", lp.File, s.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			l.Color = color.Gray{Y: 110}
			if i%2 == 1 {
				l.Color = color.RGBA{R: 200, A: 255}
			}
			p.Add(l)
			p.Legend.Add(s.Name, l)
			continue
		}
		sc, err := plotter.NewScatter(s.XY)
		if err != nil {
			return "", fmt.Errorf("plot %s, series %s: %w", lp.File, s.Name, err)
		}
		sc.Color = l.Color
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
	}
	p.Legend.Top = !lp.LegendBottom
	p.Legend.Left = lp.LegendLeft
	return savePlot(p, dir, lp.File)
}

// BarPlot is a grouped bar chart over nominal categories.
type BarPlot struct {
	File, Title, Y string
	Categories     []string
	Groups         []BarGroup
	// Headroom raises the Y axis above the tallest bar by this fraction,
	// leaving room for the legend.
	Headroom float64
}

// BarGroup is one bar per category.
type BarGroup struct {
	Name   string
	Values []float64
}

// Save writes the chart to dir/File and returns the path.
func (bp BarPlot) Save(dir string) (string, error) {
	p := plot.New()
	p.Title.Text = bp.Title
	p.Y.Label.Text = bp.Y
	p.Add(plotter.NewGrid())
	w := vg.Points(float64(60 / max(1, len(bp.Groups))))
	for i, g := range bp.Groups {
		b, err := plotter.NewBarChart(plotter.Values(g.Values), w)
		if err != nil {
			return "", fmt.Errorf("plot %s, group %s: %w", bp.File, g.Name, err)
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(bp.Groups)-1)/2)
		p.Add(b)
		if len(bp.Groups) > 1 {
			p.Legend.Add(g.Name, b)
		}
	}
	p.NominalX(bp.Categories...)
	p.Legend.Top = true
	if bp.Headroom > 0 {
		top := 0.0
		for _, g := range bp.Groups {
			for _, v := range g.Values {
				top = max(top, v)
			}
		}
		p.Y.Min, p.Y.Max = 0, top*(1+bp.Headroom)
	}
	return savePlot(p, dir, bp.File)
}

func savePlot(p *plot.Plot, dir, file string) (string, error) {
	path := filepath.Join(dir, file)
	if err := p.Save(plotW, plotH, path); err != nil {
		return "", fmt.Errorf("save plot %s: %w", path, err)
	}
	return path, nil
}
