package explain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// The kernel tests program real rules with the real backend into a
// "node" namespace, run explain's code against that namespace, and send
// real connections: the endpoints explain names for an address must be
// the ones connections to it reach. Root and SWITCHYARD_KERNEL_TESTS=1;
// every namespace is the test's own and is deleted at its end.
//
//	client 192.168.50.2 --eth-client-- node 192.168.50.1
//	endpoint i 10.244.i.10 --veth-ep<i> (10.244.i.1/24)-- node, an echo server on 8080
const (
	ktNodeIP   = "192.168.50.1"
	ktClientIP = "192.168.50.2"
	ktEPs      = 3
)

// kernelNode is the namespaces of one test.
type kernelNode struct {
	node, client string
}

func newKernelNode(t *testing.T) *kernelNode {
	t.Helper()
	kn := &kernelNode{node: kerneltest.NewNetns(t, "syex-node"), client: kerneltest.NewNetns(t, "syex-client")}
	n := kn.node
	run := func(args ...string) { kerneltest.Run(t, args...) }
	run("ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	veth(t, n, "eth-client", kn.client, ktNodeIP+"/24", ktClientIP+"/24", ktNodeIP)
	run("ip", "-n", n, "route", "add", "default", "via", ktClientIP)
	for i := 1; i <= ktEPs; i++ {
		ep := kerneltest.NewNetns(t, fmt.Sprintf("syex-ep%d", i))
		veth(t, n, fmt.Sprintf("veth-ep%d", i), ep, fmt.Sprintf("10.244.%d.1/24", i), endpointIP(i)+"/24", fmt.Sprintf("10.244.%d.1", i))
		serveName(t, ep, endpointIP(i))
	}
	return kn
}

func endpointIP(i int) string { return fmt.Sprintf("10.244.%d.10", i) }

// veth links node and peer: hostSide with hostAddr in node, eth0 with
// peerAddr and a default route via gw in peer.
func veth(t *testing.T, node, hostSide, peer, hostAddr, peerAddr, gw string) {
	for _, c := range [][]string{
		{"ip", "-n", node, "link", "add", hostSide, "type", "veth", "peer", "name", "eth0", "netns", peer},
		{"ip", "-n", node, "addr", "add", hostAddr, "dev", hostSide},
		{"ip", "-n", node, "link", "set", hostSide, "up"},
		{"ip", "-n", peer, "addr", "add", peerAddr, "dev", "eth0"},
		{"ip", "-n", peer, "link", "set", "eth0", "up"},
		{"ip", "-n", peer, "route", "add", "default", "via", gw},
	} {
		kerneltest.Run(t, c...)
	}
}

// serveName answers every TCP connection on :8080 with name.
func serveName(t *testing.T, ns, name string) {
	kerneltest.ServeTCP(t, ns, ":8080", func(c net.Conn) { _, _ = c.Write([]byte(name + "\n")) })
}

// reached connects n times from ns to addr and returns the endpoints
// that answered, as "ip:8080", sorted; refused reports a refusal.
func reached(t *testing.T, ns, addr string, n int) (eps []string, refused bool) {
	t.Helper()
	err := kerneltest.InNetns(ns, func() error {
		for range n {
			name, err := askName(addr)
			if errors.Is(err, syscall.ECONNREFUSED) {
				refused = true
				continue
			}
			if err != nil {
				return err
			}
			if ep := name + ":8080"; !slices.Contains(eps, ep) {
				eps = append(eps, ep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("connecting to %s from %s: %v", addr, ns, err)
	}
	slices.Sort(eps)
	return eps, refused
}

func askName(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// kernelObjects: web (ClusterIP 10.96.0.10:80, NodePort 30080) on the
// first n endpoints; empty (10.96.0.20:80) without endpoints.
func kernelObjects(n int) (web, empty Objects) {
	m := map[string]string{}
	for i := 1; i <= n; i++ {
		m[endpointIP(i)] = "node-b"
	}
	web = kernelNodeObjects(webService(), slice("web-1", m))
	emptySvc := webService(func(s *v1.Service) {
		s.Name, s.Spec.Type, s.Spec.ClusterIP, s.Spec.ClusterIPs = "empty", v1.ServiceTypeClusterIP, "10.96.0.20", []string{"10.96.0.20"}
		s.Spec.Ports[0].NodePort = 0
	})
	return web, kernelNodeObjects(emptySvc)
}

func kernelNodeObjects(svc *v1.Service, eps ...*discovery.EndpointSlice) Objects {
	o := objects(svc, eps...)
	o.Node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ktNodeIP}}}}
	return o
}

// combined is the State of both Services, as one sync writes them.
func combined(objs ...Objects) *proxier.State {
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{}, Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}}
	for _, o := range objs {
		s := State(o)
		for k, v := range s.Services {
			st.Services[k] = v
		}
		for k, v := range s.Endpoints {
			st.Endpoints[k] = v
		}
		st.Node = s.Node
	}
	return st
}

// kernelMode programs a State into the node and reads the dataplane back
// as explain does.
type kernelMode struct {
	name string
	sync func(t *testing.T, ns string, st *proxier.State)
	read func(ns string, fams []v1.IPFamily, local []netip.Addr) (Dataplane, error)
}

func kernelModes() []kernelMode {
	var out []kernelMode
	for _, m := range []string{runner.ModeNFT, runner.ModeLegacy} {
		out = append(out, kernelMode{name: "iptables-" + m, sync: iptablesSync(m), read: iptablesRead(m)})
	}
	return append(out, kernelMode{name: "nftables", sync: nftablesSync, read: nftablesRead})
}

var ktDetector = proxier.DetectByClusterCIDRs(testPodCIDR)

func iptablesSync(mode string) func(*testing.T, string, *proxier.State) {
	return func(t *testing.T, ns string, st *proxier.State) {
		r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		b, err := iptables.New(iptables.Config{Runner: r, Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: ktDetector})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Sync(context.Background(), st, fullDiff()); err != nil {
			t.Fatal(err)
		}
	}
}

func iptablesRead(mode string) func(string, []v1.IPFamily, []netip.Addr) (Dataplane, error) {
	return func(ns string, fams []v1.IPFamily, local []netip.Addr) (Dataplane, error) {
		r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: 60})
		if err != nil {
			return nil, err
		}
		var exists TableExists
		if mode == runner.ModeLegacy {
			exists = LegacyTableExists
		}
		return ReadIPTables(context.Background(), "iptables", r, fams, exists, local)
	}
}

func nftablesSync(t *testing.T, ns string, st *proxier.State) {
	err := kerneltest.InNetns(ns, func() error {
		b, err := nftables.New(nftables.Config{Conn: nftables.NewNetlinkConn(), Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: ktDetector})
		if err != nil {
			return err
		}
		_, err = b.Sync(context.Background(), st, fullDiff())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func nftablesRead(_ string, fams []v1.IPFamily, local []netip.Addr) (Dataplane, error) {
	return ReadNFTables(context.Background(), nftables.NewNetlinkConn(), nftables.TableName, fams, local)
}

// kernelRules is everything the namespace's netfilter holds: nft's
// listing (nftables and iptables-nft), the legacy tables and which legacy
// tables exist.
func kernelRules(t *testing.T, ns string) string {
	t.Helper()
	out := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset")
	for _, save := range []string{"iptables-legacy-save", "ip6tables-legacy-save"} {
		out += stripComments(kerneltest.Run(t, "ip", "netns", "exec", ns, save))
	}
	return out + kerneltest.Run(t, "ip", "netns", "exec", ns, "cat", "/proc/net/ip_tables_names", "/proc/net/ip6_tables_names")
}

func stripComments(save string) string {
	var b strings.Builder
	for _, l := range strings.Split(save, "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// explainIn runs explain's reading and tracing inside the namespace, and
// checks that it changed nothing there.
func explainIn(t *testing.T, ns string, m kernelMode, o Objects) Report {
	t.Helper()
	before := kernelRules(t, ns)
	defer func() {
		if after := kernelRules(t, ns); after != before {
			t.Errorf("explain changed the kernel:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	}()
	var rep Report
	err := kerneltest.InNetns(ns, func() error {
		local, err := LocalAddrs()
		if err != nil {
			return err
		}
		dp, err := m.read(ns, o.Families, local)
		if err != nil {
			return err
		}
		rep = Build(o, dp, InInterface)
		return nil
	})
	if err != nil {
		t.Fatalf("explain in %s: %v", ns, err)
	}
	return rep
}

// reachedBy lists the endpoints a check's result names.
func reachedBy(c CheckResult) []string {
	var out []string
	for _, s := range c.Reached {
		out = append(out, s.Endpoint.String())
	}
	return out
}

// TestKernelExplainMatchesTraffic: in every host mode, explain's view of
// a Service programmed by the real backend agrees with the API and with
// real connections: the endpoints it names for the cluster IP (from the
// node) and the NodePort (from a client outside) are the ones that
// answer, a Service without endpoints is refused, and an endpoint the API
// gained since the sync shows as missing and answers nobody.
func TestKernelExplainMatchesTraffic(t *testing.T) {
	kerneltest.Require(t)
	for _, m := range kernelModes() {
		t.Run(m.name, func(t *testing.T) {
			kn := newKernelNode(t)
			web, empty := kernelObjects(ktEPs)
			m.sync(t, kn.node, combined(web, empty))
			checkWeb(t, kn, explainIn(t, kn.node, m, web))
			checkEmpty(t, kn, explainIn(t, kn.node, m, empty))
			grown, _ := kernelObjects(ktEPs + 1)
			checkGrown(t, kn, explainIn(t, kn.node, m, grown))
		})
	}
}

func checkWeb(t *testing.T, kn *kernelNode, rep Report) {
	if n := rep.Problems(); n != 0 {
		t.Fatalf("%d problems:\n%s", n, text(rep, true))
	}
	cip, np := rep.Ports[0].Checks[0], rep.Ports[0].Checks[1]
	got, _ := reached(t, kn.node, "10.96.0.10:80", 40)
	if want := reachedBy(cip); !slices.Equal(got, want) {
		t.Errorf("cluster IP: connections reach %v, explain says %v", got, want)
	}
	got, _ = reached(t, kn.client, ktNodeIP+":30080", 40)
	if want := reachedBy(np); !slices.Equal(got, want) {
		t.Errorf("NodePort: connections reach %v, explain says %v", got, want)
	}
	t.Logf("explain:\n%s", text(rep, false))
}

func checkEmpty(t *testing.T, kn *kernelNode, rep Report) {
	c := rep.Ports[0].Checks[0]
	if !c.OK() || len(c.Reached) != 0 || c.Verdicts[0] != "reject" {
		t.Fatalf("empty service:\n%s", text(rep, true))
	}
	if got, refused := reached(t, kn.node, "10.96.0.20:80", 3); !refused || len(got) > 0 {
		t.Errorf("empty service: reached %v, refused %v", got, refused)
	}
}

func checkGrown(t *testing.T, kn *kernelNode, rep Report) {
	c := rep.Ports[0].Checks[0]
	if got := addrPorts(c.Missing); got != endpointIP(ktEPs+1)+":8080" || c.OK() {
		t.Errorf("missing %q:\n%s", got, text(rep, false))
	}
	got, _ := reached(t, kn.node, "10.96.0.10:80", 40)
	if want := reachedBy(c); !slices.Equal(got, want) {
		t.Errorf("connections reach %v, explain says the kernel holds %v", got, want)
	}
	t.Logf("explain after the API gained an endpoint:\n%s", text(rep, false))
}
