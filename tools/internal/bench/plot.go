package bench

import (
	"fmt"
	"io"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// cdfPoints is the most points drawn per curve; the CDF is sampled evenly in rank.
const cdfPoints = 400

// WriteCDF draws the latency CDF of every publisher, one panel per rate, as SVG, or as PNG
// when png is set.
func WriteCDF(w io.Writer, steady []SteadyResult, png bool) error {
	var rates []int
	pubs := map[int][]SteadyResult{}
	for _, s := range steady {
		if s.Publisher == RawProducer {
			continue // produce to acknowledgement, not commit to consumer
		}
		if _, ok := pubs[s.Rate]; !ok {
			rates = append(rates, s.Rate)
		}
		pubs[s.Rate] = append(pubs[s.Rate], s)
	}
	if len(rates) == 0 {
		return fmt.Errorf("bench: no steady results to plot")
	}
	colorOf := map[string]int{}
	row := make([]*plot.Plot, 0, len(rates))
	for _, rate := range rates {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%d rows/s", rate)
		p.X.Label.Text = "commit → consumer latency (ms, log scale)"
		p.Y.Label.Text = "fraction of records"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		// The band above 1 holds the legend clear of the curves.
		p.Y.Min, p.Y.Max = 0, 1.32
		p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25}, {Value: 0.5, Label: "0.5"},
			{Value: 0.75}, {Value: 0.9, Label: "0.9"}, {Value: 1, Label: "1"}})
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), -vg.Points(2)
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		for _, s := range pubs[rate] {
			if len(s.Latencies) == 0 {
				continue
			}
			c, ok := colorOf[s.Publisher]
			if !ok {
				c = len(colorOf)
				colorOf[s.Publisher] = c
			}
			l, err := plotter.NewLine(cdf(s.Latencies))
			if err != nil {
				return fmt.Errorf("bench: plot %s: %w", s.Publisher, err)
			}
			l.Color = plotutil.Color(c)
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(c)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s (p50 %.1f ms)", s.Publisher, msf(s.P50)), l)
		}
		row = append(row, p)
	}
	width, height := vg.Length(len(rates))*4*vg.Inch, 4*vg.Inch
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if png {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(150))}
	} else {
		c = vgsvg.New(width, height)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(rates), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	_, err := c.WriteTo(w)
	return err
}

// cdf samples the empirical CDF of sorted latencies, in milliseconds (at least 0.01, for
// the log axis).
func cdf(sorted []time.Duration) plotter.XYs {
	n := len(sorted)
	step := max(1, n/cdfPoints)
	xys := make(plotter.XYs, 0, n/step+2)
	for i := 0; i < n; i += step {
		xys = append(xys, plotter.XY{X: math.Max(msf(sorted[i]), 0.01), Y: float64(i+1) / float64(n)})
	}
	xys = append(xys, plotter.XY{X: math.Max(msf(sorted[n-1]), 0.01), Y: 1})
	return xys
}
