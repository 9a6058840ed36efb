package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is the "cpu" line of /proc/stat: user, nice, system, idle,
// iowait, irq, softirq, steal, in clock ticks.
type cpuTimes [8]int64

// clockTick is USER_HZ, 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

func readCPU() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}, fmt.Errorf("/proc/stat: empty")
	}
	return parseCPULine(sc.Text())
}

func parseCPULine(line string) (cpuTimes, error) {
	var t cpuTimes
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return t, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i := range t {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return t, fmt.Errorf("/proc/stat: %w", err)
		}
		t[i] = v
	}
	return t, nil
}

func (t cpuTimes) sub(o cpuTimes) cpuTimes {
	for i := range t {
		t[i] -= o[i]
	}
	return t
}

func ticks(n int64) time.Duration { return time.Duration(n) * clockTick }

// kernel is system + irq + softirq: where netfilter and the stack run.
func (t cpuTimes) kernel() time.Duration { return ticks(t[2] + t[5] + t[6]) }

// busy is everything but idle, iowait and steal.
func (t cpuTimes) busy() time.Duration { return ticks(t[0] + t[1] + t[2] + t[5] + t[6]) }

func (t cpuTimes) all() time.Duration {
	var s int64
	for _, v := range t {
		s += v
	}
	return ticks(s)
}
