//go:build e2e

package hollow

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nodePrefix names the hollow nodes of both proxies: hollow-node-0, ...
const nodePrefix = "hollow-node-"

// child is one hollow process: its output is read line by line by the
// fleet, which keeps the last lines for error messages.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu   sync.Mutex
	tail []string
}

const tailLines = 20

// startChild starts argv, with env added to this process's environment,
// its stdout and stderr into onLine (one goroutine per stream); stderr is
// also copied to the file logTo when it is set.
func startChild(name string, argv, env []string, logTo string, onLine func(c *child, line string)) (*child, error) {
	c := &child{name: name, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errPipe, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	var stderr io.Reader = errPipe
	if logTo != "" {
		f, err := os.Create(logTo)
		if err != nil {
			return nil, err
		}
		stderr = io.TeeReader(errPipe, f)
		defer func() { go func() { <-c.done; f.Close() }() }()
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var readers sync.WaitGroup
	for _, r := range []io.Reader{out, stderr} {
		readers.Go(func() { c.read(r, onLine) })
	}
	go func() {
		readers.Wait()
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) read(r io.Reader, onLine func(*child, string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		if len(c.tail) == tailLines {
			c.tail = c.tail[1:]
		}
		c.tail = append(c.tail, line)
		c.mu.Unlock()
		onLine(c, line)
	}
	_, _ = io.Copy(io.Discard, r)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited is non-nil once the child has ended.
func (c *child) exited() error {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return fmt.Errorf("%s (pid %d) exited: %v; last lines:\n%s", c.name, c.pid(), c.err, strings.Join(c.tail, "\n"))
	default:
		return nil
	}
}

// stop sends SIGTERM to the child's own PID, SIGKILL after 10 s.
func (c *child) stop() {
	if c.exited() != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// fleet is the N hollow proxies of one measurement.
type fleet struct {
	proxy    string
	children []*child

	mu    sync.Mutex
	ready map[string]map[string]bool // child -> ready signals seen
	need  int                        // ready signals per child
	probe func(key string) (int, bool)
	book  *probeBook
}

func newFleet(proxy string, book *probeBook, probe func(string) (int, bool), need int) *fleet {
	return &fleet{proxy: proxy, ready: map[string]map[string]bool{}, need: need, probe: probe, book: book}
}

func (f *fleet) markReady(c *child, signal string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ready[c.name] == nil {
		f.ready[c.name] = map[string]bool{}
	}
	f.ready[c.name][signal] = true
}

// allReady tells whether every child has given its ready signals; an error
// when one exited.
func (f *fleet) allReady() (bool, error) {
	for _, c := range f.children {
		if err := c.exited(); err != nil {
			return false, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.children {
		if len(f.ready[c.name]) >= f.need {
			n++
		}
	}
	return n == len(f.children), nil
}

func (f *fleet) pids() []int {
	out := make([]int, len(f.children))
	for i, c := range f.children {
		out[i] = c.pid()
	}
	return out
}

func (f *fleet) alive() error {
	var errs []error
	for _, c := range f.children {
		errs = append(errs, c.exited())
	}
	return errors.Join(errs...)
}

func (f *fleet) stop() {
	var wg sync.WaitGroup
	for _, c := range f.children {
		wg.Go(c.stop)
	}
	wg.Wait()
}

// startSwitchyard runs `switchyard hollow` for n nodes in procs processes
// (n/procs nodes each, the first ones one more): ready once each prints
// hollow-ready; each hollow node's sync that names a probe's service port
// is that node's sighting of the probe. A process of c nodes runs with
// GOMAXPROCS 2c: each of kubemark's processes has 2 (the machine's CPUs),
// and on a machine shared with other work the scheduler shares the CPUs
// out by thread, so one process of 2 threads would get a tenth of the time
// ten kubemark processes get. HOLLOW_SWITCHYARD_GOMAXPROCS, when set,
// is every process's GOMAXPROCS instead.
func startSwitchyard(bin, kubeconfig, logDir string, n, procs int, book *probeBook, probe func(string) (int, bool)) (*fleet, error) {
	f := newFleet("switchyard", book, probe, 1)
	procs = min(max(procs, 1), n)
	first := 0
	for k := range procs {
		count := n / procs
		if k < n%procs {
			count++
		}
		argv := []string{bin, "hollow", "--count", fmt.Sprint(count), "--first-index", fmt.Sprint(first),
			"--node-name-prefix", nodePrefix, "--kubeconfig", kubeconfig}
		argv = append(argv, strings.Fields(os.Getenv("HOLLOW_SWITCHYARD_ARGS"))...)
		env := []string{fmt.Sprintf("GOMAXPROCS=%d", 2*count)}
		if v := os.Getenv("HOLLOW_SWITCHYARD_GOMAXPROCS"); v != "" {
			env = []string{"GOMAXPROCS=" + v}
		}
		c, err := startChild(fmt.Sprintf("switchyard-hollow-%d", k), argv, env, fmt.Sprintf("%s/switchyard-n%d-%d.log", logDir, n, k), f.switchyardLine)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.children = append(f.children, c)
		first += count
	}
	return f, nil
}

func (f *fleet) switchyardLine(c *child, line string) {
	if readyLine(line) {
		f.markReady(c, "ready")
		return
	}
	s, ok := parseSyncLine(line)
	if !ok {
		return
	}
	for _, name := range s.Names {
		if p, ok := f.probe(name); ok {
			f.book.saw(p, s.Node, s.At)
		}
	}
}

// startKubemark runs n `kubemark --morph=proxy` processes, each logging
// upstream's proxy config handlers at -v=4 (--vmodule=config=4): ready once
// both initial lists were handed over; a probe slice's add is its
// sighting, at the log line's time.
func startKubemark(bin, kubeconfig string, n int, book *probeBook, probe func(string) (int, bool)) (*fleet, error) {
	f := newFleet("kube-proxy", book, probe, 2)
	for i := range n {
		name := fmt.Sprintf("%s%d", nodePrefix, i)
		argv := []string{bin, "--morph=proxy", "--name=" + name, "--kubeconfig=" + kubeconfig, "-v=0", "--vmodule=config=4"}
		c, err := startChild(name, argv, nil, "", f.kubemarkLine)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.children = append(f.children, c)
	}
	return f, nil
}

func (f *fleet) kubemarkLine(c *child, line string) {
	if sig := kubemarkSynced(line); sig != "" {
		f.markReady(c, sig)
		return
	}
	slice, at, ok := kubemarkSliceAdd(line, time.Now())
	if !ok {
		return
	}
	if p, ok := f.probe(slice); ok {
		f.book.saw(p, c.name, at)
	}
}
