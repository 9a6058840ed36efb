package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// goBenchResult is one line of `go test -bench` output.
type goBenchResult struct {
	pkg, name string
	values    []goBenchValue
}

type goBenchValue struct {
	value float64
	unit  string
}

// parseGoBench reads `go test -bench -benchmem` output: "pkg: ..." lines
// name the package of the benchmark lines that follow.
func parseGoBench(r io.Reader) ([]goBenchResult, error) {
	var out []goBenchResult
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = shortPkg(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		res := goBenchResult{pkg: pkg, name: trimProcs(f[0])}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %w", line, err)
			}
			res.values = append(res.values, goBenchValue{value: v, unit: f[i+1]})
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// trimProcs drops the "-2" GOMAXPROCS suffix.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func shortPkg(p string) string {
	return strings.TrimPrefix(p, "github.com/switchyard-proxy/switchyard/")
}

// summary prints the values readably: times, bytes, counts.
func (g goBenchResult) summary() string {
	var parts []string
	for _, v := range g.values {
		switch v.unit {
		case "ns/op":
			parts = append(parts, fmtDur(time.Duration(v.value))+"/op")
		case "B/op":
			parts = append(parts, fmt.Sprintf("%.1f MB/op", v.value/1e6))
		case "allocs/op":
			parts = append(parts, fmt.Sprintf("%.0f allocs/op", v.value))
		default:
			parts = append(parts, fmt.Sprintf("%.4g %s", v.value, v.unit))
		}
	}
	return strings.Join(parts, ", ")
}
