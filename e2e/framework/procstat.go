package framework

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Kill sends SIGKILL (no chance to clean up: a crash) and waits for the
// exit. Killing an exited process is a no-op.
func (p *Process) Kill() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	<-p.done
	return nil
}

// Memory is a process's resident memory from /proc/PID/status: VmRSS and
// its split into anonymous pages (the process's own data) and file pages
// (its binary and libraries, shared and reclaimable), and the most it ever
// held (VmHWM).
type Memory struct {
	RSS, Anon, File, Peak int64
}

// ReadMemory reads pid's Memory.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File, "VmHWM:": &m.Peak}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, _ := strings.Cut(sc.Text(), "\t")
		dst, ok := fields[name]
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("%s %q: %w", name, v, err)
		}
		*dst = kb * 1024
		delete(fields, name)
	}
	if len(fields) > 0 {
		return Memory{}, fmt.Errorf("/proc/%d/status lacks %d of VmRSS, RssAnon, RssFile, VmHWM", pid, len(fields))
	}
	return m, sc.Err()
}

// ResetPeakMemory sets pid's VmHWM back to its current VmRSS (writing 5 to
// /proc/PID/clear_refs), so that a later ReadMemory's Peak is the most it
// held since.
func ResetPeakMemory(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// RSSBytes is the resident set size of a process (VmRSS).
func RSSBytes(pid int) (int64, error) {
	m, err := ReadMemory(pid)
	return m.RSS, err
}

// MetricValue scrapes the daemon and returns the value of the sample of
// name whose labels include want (the sum over matching samples; for a
// histogram, the sum of their sample counts).
func (d *Daemon) MetricValue(ctx context.Context, name string, want map[string]string) (float64, error) {
	text, err := d.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return ParseMetric(text, name, want)
}

// ParseMetric finds a sample in Prometheus text exposition format.
func ParseMetric(text, name string, want map[string]string) (float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, fmt.Errorf("parse metrics: %w", err)
	}
	fam, ok := families[name]
	if !ok {
		return 0, fmt.Errorf("no metric %s", name)
	}
	var sum float64
	found := false
	for _, m := range fam.GetMetric() {
		labels := model.LabelSet{}
		for _, lp := range m.GetLabel() {
			labels[model.LabelName(lp.GetName())] = model.LabelValue(lp.GetValue())
		}
		if !matches(labels, want) {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	if !found {
		return 0, fmt.Errorf("no sample of %s with labels %v", name, want)
	}
	return sum, nil
}

func matches(labels model.LabelSet, want map[string]string) bool {
	for k, v := range want {
		if string(labels[model.LabelName(k)]) != v {
			return false
		}
	}
	return true
}

// ProcCPU is the CPU time (user and system) pid has used, from
// /proc/PID/stat (clock ticks of 10 ms).
func ProcCPU(pid int) (time.Duration, error) {
	f, err := procStat(pid)
	if err != nil || len(f) < 13 {
		return 0, fmt.Errorf("CPU of %d: %v", pid, err)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU of %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
