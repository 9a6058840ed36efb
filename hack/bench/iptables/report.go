package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one line of the printed table.
type row struct {
	section, kase, metric, value, target, met string
}

// report collects the rows of the one table the harness prints.
type report struct {
	rows []row
}

func (r *report) add(section, kase, metric, value string) {
	r.rows = append(r.rows, row{section: section, kase: kase, metric: metric, value: value, target: "-", met: "-"})
}

// addTarget adds a figure that has a target.
func (r *report) addTarget(section, kase, metric, value, target string, ok bool) {
	met := "MISSED"
	if ok {
		met = "yes"
	}
	r.rows = append(r.rows, row{section: section, kase: kase, metric: metric, value: value, target: target, met: met})
}

// print writes the table, columns aligned.
func (r *report) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tCASE\tFIGURE\tVALUE\tTARGET\tMET")
	prev := ""
	for _, x := range r.rows {
		if x.section != prev && prev != "" {
			fmt.Fprintln(tw, "\t\t\t\t\t")
		}
		prev = x.section
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.section, x.kase, x.metric, x.value, x.target, x.met)
	}
	return tw.Flush()
}

// fmtDur prints a duration in s or ms with 3 significant digits.
func fmtDur(d time.Duration) string {
	switch s := d.Seconds(); {
	case s >= 100:
		return fmt.Sprintf("%.0f s", s)
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 0.1:
		return fmt.Sprintf("%.0f ms", s*1000)
	default:
		return fmt.Sprintf("%.1f ms", s*1000)
	}
}

// fmtRuns prints a median and the runs it came from.
func fmtRuns(ds []time.Duration) string {
	runs := make([]string, len(ds))
	for i, d := range ds {
		runs[i] = fmtDur(d)
	}
	return fmt.Sprintf("%s (runs: %s)", fmtDur(medianDur(ds)), strings.Join(runs, ", "))
}

func medianDur(ds []time.Duration) time.Duration {
	return time.Duration(median(seconds(ds)) * float64(time.Second))
}

func fmtMiB(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func fmtPercent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// scaleCase names a scale: "nft 10k svc x 10 ep".
func scaleCase(mode string, services, endpoints int) string {
	n := fmt.Sprint(services)
	if services%1000 == 0 {
		n = fmt.Sprintf("%dk", services/1000)
	}
	return fmt.Sprintf("%s %s svc x %d ep", mode, n, endpoints)
}
