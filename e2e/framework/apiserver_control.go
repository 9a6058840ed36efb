package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// apiServerPidFile is where hack/local-up.sh records the kube-apiserver
// as "PID STARTTIME"; its `down` stops the process recorded there.
const apiServerPidFile = "kube-apiserver.pid"

// StoppedAPIServer is a kube-apiserver StopAPIServer stopped; Start runs it
// again with the same command line.
type StoppedAPIServer struct {
	c    *Cluster
	argv []string
}

// StopAPIServer stops the kube-apiserver of a cluster StartCluster started
// (etcd keeps running), after recording its command line. It signals only
// the PID local-up.sh recorded, and only if that PID is still the process
// it started.
func (c *Cluster) StopAPIServer() (*StoppedAPIServer, error) {
	pid, argv, err := c.recordedCommand(apiServerPidFile)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := stopPID(pid); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	return &StoppedAPIServer{c: c, argv: argv}, nil
}

// stopGraceAPIServer is how long stopPID waits after SIGTERM, as
// local-up.sh does: kube-apiserver waits up to 60 s for open watches.
const stopGraceAPIServer = 10 * time.Second

// stopPID sends SIGTERM, then SIGKILL after stopGraceAPIServer, and waits
// until the process is gone (or a zombie: local-up.sh's children are
// reparented to an init that may not reap them).
func stopPID(pid int) error {
	gone := func() (bool, error) {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err) || isZombie(pid), nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM %d: %w", pid, err)
	}
	if WaitFor(stopGraceAPIServer, gone) == nil {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL %d: %w", pid, err)
	}
	if err := WaitFor(10*time.Second, gone); err != nil {
		return fmt.Errorf("%d did not exit after SIGKILL: %w", pid, err)
	}
	return nil
}

// WithArgs returns a copy of s whose command line ends with args (a later
// occurrence of a flag wins); Start of that copy runs the kube-apiserver
// with them, and so does every later restart of a StopAPIServer.
func (s *StoppedAPIServer) WithArgs(args ...string) *StoppedAPIServer {
	return &StoppedAPIServer{c: s.c, argv: append(append([]string(nil), s.argv...), args...)}
}

// Start runs the kube-apiserver again, records it for local-up.sh's `down`
// and waits until it is ready.
func (s *StoppedAPIServer) Start(ctx context.Context) error {
	p, err := s.c.restart("kube-apiserver", apiServerPidFile, s.argv)
	if err != nil {
		return err
	}
	return WaitFor(60*time.Second, func() (bool, error) {
		if err := exitError(p); err != nil {
			return false, err
		}
		body, err := s.c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(bytes.TrimSpace(body)) == "ok", err
	})
}

// restart starts argv as the cluster's component name (its log in RunDir)
// and records it in pidFile as local-up.sh does, so that `down` stops it.
func (c *Cluster) restart(name, pidFile string, argv []string) (*Process, error) {
	logPath := filepath.Join(c.RunDir, name+".restarted.log")
	p, err := StartProcess(name, logPath, argv...)
	if err != nil {
		return nil, err
	}
	st, err := procStartTime(p.PID())
	if err != nil {
		return nil, err
	}
	record := fmt.Sprintf("%d %s\n", p.PID(), st)
	if err := os.WriteFile(filepath.Join(c.RunDir, pidFile), []byte(record), 0o600); err != nil {
		return nil, fmt.Errorf("record restarted %s: %w", name, err)
	}
	return p, nil
}

// recordedCommand returns the PID recorded in pidFile (checked as
// recordedPID does) and its command line.
func (c *Cluster) recordedCommand(pidFile string) (int, []string, error) {
	if c.RunDir == "" || c.stop == nil {
		return 0, nil, errors.New("only a cluster this process started can be stopped")
	}
	pid, err := recordedPID(filepath.Join(c.RunDir, pidFile))
	if err != nil {
		return 0, nil, err
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, nil, fmt.Errorf("command line of %d: %w", pid, err)
	}
	return pid, strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), nil
}

// recordedPID reads a local-up.sh pid file and checks that the PID still is
// the process recorded (same start time).
func recordedPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, fmt.Errorf("%s: want \"PID STARTTIME\", got %q", path, b)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if st, err := procStartTime(pid); err != nil || st != fields[1] {
		return 0, fmt.Errorf("%s: process %d is not the one recorded (start time %q, want %q): %v", path, pid, st, fields[1], err)
	}
	return pid, nil
}

// procStat returns the fields of /proc/PID/stat after the command name.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// procStartTime is field 22 of /proc/PID/stat (jiffies since boot), as
// local-up.sh records it.
func procStartTime(pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil || len(f) < 20 {
		return "", fmt.Errorf("start time of %d: %v", pid, err)
	}
	return f[19], nil
}

func isZombie(pid int) bool {
	f, err := procStat(pid)
	return err == nil && len(f) > 0 && f[0] == "Z"
}
