package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

const (
	nodeIP        = "192.168.77.1"
	clientIP      = "192.168.77.2"
	bridgeIP      = "10.244.77.1"
	podIP         = "10.244.77.2"
	podCIDR       = "10.244.0.0/16"
	podPort       = 8080
	servicePort   = 80
	userspaceCIP  = "10.96.77.10"
	iptablesCIP   = "10.96.77.20"
	serviceCIDR   = "10.96.0.0/16"
	netnsPrefix   = "sybench-us-"
	defaultConns  = 1000
	defaultRuns   = 3
	defaultWarmup = 50
)

func main() {
	role := flag.String("role", "", "internal: child process role (server, userspace, client)")
	addr := flag.String("addr", "", "internal: client target")
	conns := flag.Int("conns", defaultConns, "connections per run and mode")
	runs := flag.Int("runs", defaultRuns, "runs per mode (alternating)")
	warmup := flag.Int("warmup", defaultWarmup, "unmeasured connections before each run")
	flag.Parse()
	var err error
	switch *role {
	case "server":
		err = serveRole(podPort)
	case "userspace":
		err = userspaceRole(nodeIP, userspaceCIP, podIP+":"+strconv.Itoa(podPort), servicePort)
	case "client":
		err = clientRole(*addr, *conns, *warmup)
	case "":
		err = run(*conns, *runs, *warmup)
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-userspace:", err)
		os.Exit(1)
	}
}

// run builds the namespaces, starts both modes, measures and prints.
func run(conns, runs, warmup int) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, iptables)")
	}
	tp, err := newTopology()
	defer func() { err = errors.Join(err, tp.delete()) }()
	if err != nil {
		return err
	}
	// Interrupted: the children see their stdin close and clean up; the
	// namespaces go here.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		tp.delete()
		os.Exit(1)
	}()
	server, err := tp.startChild(tp.pod, "-role", "server")
	if err != nil {
		return err
	}
	defer server.stop()
	proxy, err := tp.startChild(tp.node, "-role", "userspace")
	if err != nil {
		return err
	}
	defer proxy.stop()
	if err := syncIPTables(tp.node); err != nil {
		return err
	}
	modes := []struct{ name, addr string }{
		{"userspace", userspaceCIP + ":" + strconv.Itoa(servicePort)},
		{"iptables", iptablesCIP + ":" + strconv.Itoa(servicePort)},
	}
	rows := map[string][]summary{}
	fmt.Printf("%d short TCP connections per run (connect, %d-byte request, half-close, read reply, close), one at a time\n", conns, requestSize)
	fmt.Printf("%-10s %-7s %10s %10s %10s %7s\n", "mode", "run", "conn/s", "p50", "p99", "errors")
	for i := range runs {
		for _, m := range modes {
			res, err := tp.runClient(m.addr, conns, warmup)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", m.name, i+1, err)
			}
			s := summarize(m.name, strconv.Itoa(i+1), res)
			rows[m.name] = append(rows[m.name], s)
			fmt.Println(s)
		}
	}
	for _, m := range modes {
		fmt.Println(medianRun(rows[m.name]))
	}
	return nil
}

// syncIPTables programs the iptables mode's rules for its service in ns.
func syncIPTables(ns string) error {
	r, err := runner.New(runner.Options{Netns: ns, WaitSeconds: 60})
	if err != nil {
		return err
	}
	b, err := iptables.New(iptables.Config{Runner: r, LocalDetector: proxier.DetectByClusterCIDRs(netip.MustParsePrefix(podCIDR))})
	if err != nil {
		return err
	}
	st := benchState("iptables", iptablesCIP, servicePort, netip.MustParseAddrPort(podIP+":"+strconv.Itoa(podPort)), nodeIP)
	_, err = b.Sync(context.Background(), st, nil)
	return err
}

// benchState is one TCP service with one ready endpoint on this node.
func benchState(name, clusterIP string, port int, ep netip.AddrPort, node string) *proxier.State {
	spn := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: name}, Port: "tcp", Protocol: v1.ProtocolTCP}
	return &proxier.State{
		Services: map[proxier.ServicePortName]*proxier.ServicePort{spn: {
			Name: spn, Protocol: v1.ProtocolTCP, Port: uint16(port), ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)}}},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{spn: {{
			IP: ep.Addr(), Port: ep.Port(), Ready: true, Serving: true, NodeName: "bench-node", IsLocal: true}}},
		Node: proxier.NodeInfo{Name: "bench-node", Addresses: []netip.Addr{netip.MustParseAddr(node)}},
	}
}

// topology is the three namespaces.
type topology struct {
	node, client, pod string
	self              string
}

func newTopology() (*topology, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return &topology{}, err
	}
	id := hex.EncodeToString(b[:])
	self, err := os.Executable()
	if err != nil {
		return &topology{}, err
	}
	tp := &topology{self: self}
	for _, ns := range []*string{&tp.node, &tp.client, &tp.pod} {
		name := netnsPrefix + id + "-" + strconv.Itoa(len(tp.names()))
		if err := ip("netns", "add", name); err != nil {
			return tp, err
		}
		*ns = name
	}
	return tp, tp.wire()
}

// names lists the namespaces created so far.
func (tp *topology) names() []string {
	var out []string
	for _, n := range []string{tp.node, tp.client, tp.pod} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// wire links and addresses the namespaces (all commands act inside
// them; the host namespace is never touched).
func (tp *topology) wire() error {
	n, c, p := tp.node, tp.client, tp.pod
	steps := [][]string{
		{"-n", n, "link", "add", "vc0", "type", "veth", "peer", "name", "vc1", "netns", c},
		{"-n", n, "link", "add", "vp0", "type", "veth", "peer", "name", "vp1", "netns", p},
		{"-n", n, "addr", "add", nodeIP + "/24", "dev", "vc0"},
		{"-n", n, "addr", "add", bridgeIP + "/24", "dev", "vp0"},
		{"-n", c, "addr", "add", clientIP + "/24", "dev", "vc1"},
		{"-n", p, "addr", "add", podIP + "/24", "dev", "vp1"},
	}
	for _, ns := range []struct{ ns, dev string }{{n, "vc0"}, {n, "vp0"}, {n, "lo"}, {c, "vc1"}, {c, "lo"}, {p, "vp1"}, {p, "lo"}} {
		steps = append(steps, []string{"-n", ns.ns, "link", "set", ns.dev, "up"})
	}
	steps = append(steps,
		[]string{"-n", c, "route", "add", serviceCIDR, "via", nodeIP},
		[]string{"-n", c, "route", "add", podCIDR, "via", nodeIP},
		[]string{"-n", p, "route", "add", "default", "via", bridgeIP},
		// Node-originated traffic to a cluster IP needs a route before
		// nat OUTPUT rewrites it.
		[]string{"-n", n, "route", "add", "default", "via", clientIP},
	)
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	for _, s := range [][]string{
		{n, "net.ipv4.ip_forward=1"},
		{n, "net.ipv4.tcp_tw_reuse=1"}, {c, "net.ipv4.tcp_tw_reuse=1"},
		{n, "net.ipv4.ip_local_port_range=1024 65000"}, {c, "net.ipv4.ip_local_port_range=1024 65000"},
	} {
		if err := ip("netns", "exec", s[0], "sysctl", "-q", "-w", s[1]); err != nil {
			return err
		}
	}
	return nil
}

// delete removes the namespaces (their rules, links and sockets go with
// them).
func (tp *topology) delete() error {
	var errs []error
	for _, n := range tp.names() {
		errs = append(errs, ip("netns", "del", n))
	}
	return errors.Join(errs...)
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// child is a role process inside a namespace.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startChild starts this binary with args inside ns and waits for its
// "ready".
func (tp *topology) startChild(ns string, args ...string) (*child, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, tp.self}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		ch.stop()
		return nil, fmt.Errorf("%s in %s did not start: %q %v", strings.Join(args, " "), ns, line, err)
	}
	return ch, nil
}

// stop closes the child's stdin (it cleans up and exits) and waits.
func (ch *child) stop() {
	ch.stdin.Close()
	ch.cmd.Wait()
}

// client runs one measured run from the client namespace.
func (tp *topology) runClient(addr string, conns, warmup int) (result, error) {
	cmd := exec.Command("ip", "netns", "exec", tp.client, tp.self, "-role", "client", "-addr", addr,
		"-conns", strconv.Itoa(conns), "-warmup", strconv.Itoa(warmup))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, err
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil {
		return result{}, fmt.Errorf("client output %q: %w", out, err)
	}
	return res, nil
}
