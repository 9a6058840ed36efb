package framework

import (
	"path/filepath"
	"testing"
)

// logTailLines is how much of a process log a failed test prints.
const logTailLines = 40

// StartManaged starts argv with its output in a per-test log file and stops
// it (by its PID) in t.Cleanup. If the test failed, the log tail is printed.
func StartManaged(t testing.TB, name string, argv ...string) *Process {
	t.Helper()
	p, err := StartProcess(name, filepath.Join(t.TempDir(), name+".log"), argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if exited, err := p.Exited(); exited {
			t.Logf("%s (pid %d) had already exited: %v", name, p.PID(), err)
		}
		if err := p.Stop(); err != nil {
			t.Errorf("stop %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s log (%s), last %d lines:\n%s", name, p.LogPath, logTailLines, p.LogTail(logTailLines))
		}
	})
	return p
}

// StartInNetns is StartManaged for a process inside network namespace ns.
// `ip netns exec` execs argv in place, so the PID is argv's own.
func StartInNetns(t testing.TB, name, ns string, argv ...string) *Process {
	t.Helper()
	return StartManaged(t, name, append([]string{"ip", "netns", "exec", ns}, argv...)...)
}
