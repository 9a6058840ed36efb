package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dataplane serve|short|latency|stream|udp [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	if cmd == "serve" {
		if err := runServe(args); err != nil {
			fmt.Fprintln(os.Stderr, "dataplane serve:", err)
			os.Exit(1)
		}
		return
	}
	res, err := runClient(cmd, args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dataplane %s: %v\n", cmd, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// clientConfig is what every workload takes.
type clientConfig struct {
	addrs    []string
	clients  int
	duration time.Duration
	timeout  time.Duration
}

func runClient(cmd string, args []string) (Result, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	addr := fs.String("addr", "", "host:port[,host:port...]")
	clients := fs.Int("clients", 16, "parallel clients (short, udp)")
	duration := fs.Duration("duration", 3*time.Second, "how long to run")
	timeout := fs.Duration("timeout", time.Second, "per-operation timeout")
	if err := fs.Parse(args); err != nil {
		return Result{}, err
	}
	if *addr == "" {
		return Result{}, fmt.Errorf("-addr is required")
	}
	c := clientConfig{addrs: strings.Split(*addr, ","), clients: *clients, duration: *duration, timeout: *timeout}
	run, ok := workloads[cmd]
	if !ok {
		return Result{}, fmt.Errorf("unknown workload %q", cmd)
	}
	before, err := readCPU()
	if err != nil {
		return Result{}, err
	}
	res := run(c)
	after, err := readCPU()
	if err != nil {
		return Result{}, err
	}
	res.Workload = cmd
	res.setCPU(after.sub(before))
	return res, nil
}

var workloads = map[string]func(clientConfig) Result{
	"short":   runShort,
	"latency": runLatency,
	"stream":  runStream,
	"udp":     runUDP,
}
