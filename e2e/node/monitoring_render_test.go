//go:build node

package node

import (
	"context"
	"encoding/json"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// renderDashboard draws every panel of switchyard's dashboard from the
// real Prometheus data of [start, end] into one PNG, three panels a row,
// as Grafana lays the time series out (a line per series, legend below).
func renderDashboard(t *testing.T, p *framework.Prometheus, path string, start, end time.Time) {
	panels := readPanels(t)
	const cols = 3
	rows := (len(panels) + cols - 1) / cols
	img := vgimg.New(vg.Points(float64(cols)*420), vg.Points(float64(rows)*300))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(8), PadY: vg.Points(8)}
	for i, pn := range panels {
		pl := panelPlot(t, p, pn, start, end)
		pl.Draw(tiles.At(dc, i%cols, i/cols))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard drawn to %s (%d panels)", path, len(panels))
}

type panel struct {
	Title   string
	Unit    string
	Targets []struct{ Expr, Legend string }
}

func readPanels(t *testing.T) []panel {
	data, err := os.ReadFile(filepath.Join(monitoringDir, "switchyard-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var out []panel
	for _, p := range d.Panels {
		pn := panel{Title: p.Title, Unit: p.FieldConfig.Defaults.Unit}
		for _, tg := range p.Targets {
			pn.Targets = append(pn.Targets, struct{ Expr, Legend string }{dashboardExpr(tg.Expr), tg.Legend})
		}
		out = append(out, pn)
	}
	return out
}

// panelPlot is one panel: each target's series over time, x in minutes
// from start.
func panelPlot(t *testing.T, p *framework.Prometheus, pn panel, start, end time.Time) *plot.Plot {
	pl := plot.New()
	pl.Title.Text = pn.Title
	pl.X.Label.Text = "minutes"
	pl.Y.Label.Text = pn.Unit
	pl.Legend.Top = true
	n := 0
	for _, tg := range pn.Targets {
		series, err := p.QueryRange(context.Background(), tg.Expr, start, end, 5*time.Second)
		if err != nil {
			t.Errorf("%s: %v", pn.Title, err)
			continue
		}
		for _, s := range series {
			line, err := plotter.NewLine(points(s, start))
			if err != nil {
				continue
			}
			line.Color = palette[n%len(palette)]
			line.Width = vg.Points(1.5)
			pl.Add(line)
			if n < 6 {
				pl.Legend.Add(legend(tg.Legend, s.Labels), line)
			}
			n++
		}
	}
	return pl
}

func points(s framework.Series, start time.Time) plotter.XYs {
	var xy plotter.XYs
	for i, ts := range s.Times {
		v := s.Values[i]
		if v != v { // NaN: a gap, as Grafana draws it
			continue
		}
		xy = append(xy, plotter.XY{X: ts.Sub(start).Minutes(), Y: v})
	}
	return xy
}

// legend fills a Grafana legend format ("{{instance}}") from labels.
func legend(format string, labels map[string]string) string {
	out := format
	for k, v := range labels {
		out = strings.ReplaceAll(out, "{{"+k+"}}", v)
	}
	return out
}

var palette = []color.Color{
	color.RGBA{R: 0x37, G: 0x87, B: 0x2d, A: 0xff}, color.RGBA{R: 0x1f, G: 0x78, B: 0xc1, A: 0xff},
	color.RGBA{R: 0xe0, G: 0x2f, B: 0x44, A: 0xff}, color.RGBA{R: 0xf2, G: 0xcc, B: 0x0c, A: 0xff},
	color.RGBA{R: 0x8f, G: 0x3b, B: 0xb8, A: 0xff}, color.RGBA{R: 0xff, G: 0x78, B: 0x0a, A: 0xff},
}
