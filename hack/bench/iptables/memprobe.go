package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/switchyard-proxy/switchyard/internal/procstatus"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// memReport is what the memory probe child prints (JSON, one line).
type memReport struct {
	StateHeap uint64 // Go heap in use holding only the State (after GC)
	SyncHeap  uint64 // Go heap in use after the full sync (after GC): State + backend
	RSS       uint64 // VmRSS after the sync
	PeakRSS   uint64 // VmHWM: the most the process ever held
	// SettledRSS is VmRSS once the runtime returned its free pages to the
	// OS (debug.FreeOSMemory; the background scavenger gets there too,
	// over minutes): what a long-running daemon settles at.
	SettledRSS uint64
}

// probeMemory runs this binary again as a child that builds the State,
// does one full sync in a fresh namespace and reports its memory: a fresh
// process, so nothing else this harness did is counted.
func probeMemory(ctx context.Context, mode string, services, endpoints int) (memReport, error) {
	self, err := os.Executable()
	if err != nil {
		return memReport{}, err
	}
	cmd := exec.CommandContext(ctx, self, "-memprobe", fmt.Sprintf("%s:%d", mode, services),
		"-endpoints", strconv.Itoa(endpoints))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return memReport{}, fmt.Errorf("memory probe: %w: %s", err, stderr.Bytes())
	}
	var rep memReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return memReport{}, fmt.Errorf("memory probe output %q: %w", out, err)
	}
	return rep, nil
}

// runMemProbe is the child side: spec is "nft:10000".
func runMemProbe(ctx context.Context, spec string, endpoints int, w io.Writer) (err error) {
	m, n, ok := strings.Cut(spec, ":")
	services, cerr := strconv.Atoi(n)
	mode, merr := runnerMode(m)
	if !ok || cerr != nil || merr != nil {
		return fmt.Errorf("bad -memprobe %q", spec)
	}
	st := buildState(services, endpoints)
	rep := memReport{StateHeap: heapInUse()}
	ns, del, err := newNetns(mode)
	if err != nil {
		return err
	}
	defer func() {
		if derr := del(); derr != nil && err == nil {
			err = derr
		}
	}()
	r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: lockWaitSeconds})
	if err != nil {
		return err
	}
	be, err := iptables.New(backendConfig(r, 0))
	if err != nil {
		return err
	}
	if err := syncOnce(ctx, be, st, &proxier.Diff{Full: true}, true); err != nil {
		return err
	}
	rep.SyncHeap = heapInUse()
	rep.RSS, rep.PeakRSS = procStatus("VmRSS:"), procStatus("VmHWM:")
	debug.FreeOSMemory()
	rep.SettledRSS = procStatus("VmRSS:")
	runtime.KeepAlive(be)
	runtime.KeepAlive(st)
	return json.NewEncoder(w).Encode(rep)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// procStatus reads a "kB" field of /proc/self/status, in bytes (0 when
// unreadable).
func procStatus(field string) uint64 {
	b, _ := procstatus.Bytes(field)
	return uint64(b)
}
