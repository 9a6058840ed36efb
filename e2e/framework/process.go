package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 10 * time.Second

// Process is a background child process whose output goes to a log file. It
// is stopped through its own PID only.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartProcess starts argv[0] with argv[1:] and sends stdout and stderr to
// logPath.
func StartProcess(name, logPath string, argv ...string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log for %s: %w", name, err)
	}
	defer logf.Close() // the child keeps its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%v): %w", name, argv, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and its wait error if so.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the exit.
// Stopping an exited process is a no-op.
func (p *Process) Stop() error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	<-p.done
	return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s and was killed", p.Name, p.PID(), stopGrace)
}

// LogTail returns the last n lines of the process log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// LogSize is the length of the process log so far: an offset for LogFrom.
func (p *Process) LogSize() int64 {
	fi, err := os.Stat(p.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogFrom returns the process log from offset on.
func (p *Process) LogFrom(offset int64) (string, error) {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p.LogPath, err)
	}
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	return string(b[offset:]), nil
}

// exitError is non-nil once p has exited: a process that should keep running
// has failed, and waiting longer for it is pointless.
func exitError(p *Process) error {
	if exited, err := p.Exited(); exited {
		return Permanent(fmt.Errorf("%s (pid %d) exited: %v; log tail:\n%s", p.Name, p.PID(), err, p.LogTail(10)))
	}
	return nil
}
