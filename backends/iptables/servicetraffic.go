package iptables

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Per-Service traffic counters (--service-traffic-metrics).
//
// Rule counters cannot serve: a full sync rewrites nat KUBE-SERVICES (its
// counters start again at zero), reading them needs iptables-save of the
// nat table (hundreds of ms at 10k services), and counting packets with
// them would put a rule per service on every packet's path. Instead two
// hash:ip,port ipsets per family with the "counters" and "comment"
// extensions hold each service address (cluster IP, external IPs,
// load-balancer IPs) as "IP,proto:port", commented
// "namespace/name:port". Two rules in mangle KUBE-SERVICE-TRAFFIC, jumped
// to from mangle PREROUTING and OUTPUT (before nat DNAT, so packets still
// carry the service address), match them: "-m set --match-set ... dst,dst"
// for every packet, and behind "-m conntrack --ctstate NEW" for the first
// packet of each connection. A matching member's packet and byte counters
// go up: one hash lookup per packet, two per new flow, whatever the
// number of Services.
//
// The sets are kept by difference (members added and deleted, never
// flushed), so counts survive syncs and restarts; a Service's members go
// with it. Counted: packets from clients to the service address, before
// any rejection for want of endpoints; not replies; not NodePorts.
const (
	chainServiceTraffic = "KUBE-SERVICE-TRAFFIC"
	// Set names, prefixed "KUBE-6-" in IPv6 as the ipvs mode's.
	setServiceTraffic     = "KUBE-SERVICE-TRAFFIC"
	setServiceConnections = "KUBE-SERVICE-CONNS"
)

// CounterSets is the iptables mode's way to its counter ipsets: restore
// input ("create", "add", "del" lines) and `ipset save SET` output, which
// shows each member's counters and comment. IPSetRunner execs ipset;
// tests use a stateful fake.
type CounterSets interface {
	Restore(ctx context.Context, data []byte) error
	Save(ctx context.Context, set string) ([]byte, error)
}

func trafficSetName(fam v1.IPFamily, base string) string {
	if fam == v1.IPv6Protocol {
		return "KUBE-6-" + strings.TrimPrefix(base, "KUBE-")
	}
	return base
}

func ipsetFamily(fam v1.IPFamily) string {
	if fam == v1.IPv6Protocol {
		return "inet6"
	}
	return "inet"
}

// trafficChain is mangle KUBE-SERVICE-TRAFFIC, when counting.
func trafficChain(fc *familyConfig) []*chainRules {
	if !fc.serviceTraffic {
		return nil
	}
	pkts, conns := trafficSetName(fc.family, setServiceTraffic), trafficSetName(fc.family, setServiceConnections)
	return []*chainRules{newChain(tableMangle, chainServiceTraffic,
		rule(chainServiceTraffic, comment("count service traffic"), "-m set --match-set", pkts, "dst,dst"),
		rule(chainServiceTraffic, comment("count service connections"), "-m conntrack --ctstate NEW -m set --match-set", conns, "dst,dst"),
	)}
}

// trafficJumps send every packet of the family through the counters.
func trafficJumps() []jumpRule {
	args := []string{"-m", "comment", "--comment", "kubernetes service traffic counters", "-j", chainServiceTraffic}
	return []jumpRule{
		{table: tableMangle, from: "PREROUTING", to: chainServiceTraffic, args: args},
		{table: tableMangle, from: "OUTPUT", to: chainServiceTraffic, args: args},
	}
}

// counterMembers are the members both sets must hold for the state:
// "IP,proto:port" -> comment.
func counterMembers(fam v1.IPFamily, st *proxier.State) map[string]string {
	out := map[string]string{}
	for _, sp := range st.Services {
		proto := strings.ToLower(string(sp.Protocol))
		if sp.Port == 0 || (proto != "tcp" && proto != "udp" && proto != "sctp") {
			continue
		}
		cip, ok := sp.ClusterIP(fam)
		if !ok || !cip.IsValid() {
			continue
		}
		c := metrics.ServiceTrafficComment(sp.Name.Namespace, sp.Name.Name, sp.Name.Port, sp.Port)
		addrs := slices.Concat([]netip.Addr{cip}, proxier.AddrsOfFamily(sp.ExternalIPs, fam), proxier.AddrsOfFamily(sp.LoadBalancerIPs, fam))
		for _, a := range addrs {
			out[a.Unmap().String()+","+proto+":"+strconv.Itoa(int(sp.Port))] = c
		}
	}
	return out
}

// counterSetsSync keeps one family's counter sets equal to the state.
type counterSetsSync struct {
	sets CounterSets
	fam  v1.IPFamily
	// written is what both sets hold (member -> comment); nil until read
	// from the kernel.
	written map[string]string
	// created is set once a restore created both sets (or found them).
	created bool
}

// sync writes the difference between the state and the sets: creates
// them if missing (before any rule refers to them), deletes members gone
// or renamed, adds the new ones.
func (c *counterSetsSync) sync(ctx context.Context, st *proxier.State) error {
	if c.written == nil {
		have, err := c.read(ctx)
		if err != nil {
			return err
		}
		c.written = have
	}
	want := counterMembers(c.fam, st)
	var b bytes.Buffer
	for _, base := range []string{setServiceTraffic, setServiceConnections} {
		set := trafficSetName(c.fam, base)
		for _, m := range slices.Sorted(maps.Keys(c.written)) {
			if cm, ok := want[m]; !ok || cm != c.written[m] {
				fmt.Fprintf(&b, "del %s %s -exist\n", set, m)
			}
		}
		for _, m := range slices.Sorted(maps.Keys(want)) {
			if cm, ok := c.written[m]; !ok || cm != want[m] {
				fmt.Fprintf(&b, "add %s %s comment %q -exist\n", set, m, want[m])
			}
		}
	}
	if b.Len() == 0 && c.created {
		return nil
	}
	// Creating an existing set with -exist does nothing; a set deleted
	// behind our back comes back (empty) before the rules name it.
	var creates bytes.Buffer
	for _, base := range []string{setServiceTraffic, setServiceConnections} {
		fmt.Fprintf(&creates, "create %s hash:ip,port family %s counters comment -exist\n", trafficSetName(c.fam, base), ipsetFamily(c.fam))
	}
	if err := c.sets.Restore(ctx, append(creates.Bytes(), b.Bytes()...)); err != nil {
		c.written, c.created = nil, false // read again next time
		return fmt.Errorf("service traffic ipsets: %w", err)
	}
	c.written, c.created = want, true
	return nil
}

// read gives what the traffic set holds (member -> comment); empty when
// it does not exist, which sync then creates.
func (c *counterSetsSync) read(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	data, err := c.sets.Save(ctx, trafficSetName(c.fam, setServiceTraffic))
	if err != nil {
		return out, nil // no such set yet
	}
	for _, m := range parseCounted(data) {
		out[m.member] = m.comment
	}
	return out, nil
}

// counted is one member of `ipset save` output with its extensions.
type counted struct {
	member, comment string
	packets, bytes  uint64
}

// parseCounted reads the "add SET MEMBER packets N bytes N comment "C""
// lines of `ipset save`.
func parseCounted(data []byte) []counted {
	var out []counted
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "add" {
			continue
		}
		m := counted{member: f[2]}
		for i := 3; i+1 < len(f); i += 2 {
			switch f[i] {
			case "packets":
				m.packets, _ = strconv.ParseUint(f[i+1], 10, 64)
			case "bytes":
				m.bytes, _ = strconv.ParseUint(f[i+1], 10, 64)
			case "comment":
				m.comment, _ = strconv.Unquote(f[i+1])
			}
		}
		out = append(out, m)
	}
	return out
}

// ServiceTraffic implements metrics.ServiceTrafficSource: `ipset save` of
// each counter set, read now.
func (b *Backend) ServiceTraffic(ctx context.Context) ([]metrics.ServiceTrafficSample, error) {
	var out []metrics.ServiceTrafficSample
	for _, f := range b.families {
		if f.counters == nil {
			continue
		}
		at := map[string]int{}
		for _, base := range []string{setServiceTraffic, setServiceConnections} {
			data, err := f.counters.sets.Save(ctx, trafficSetName(f.fc.family, base))
			if err != nil {
				return nil, fmt.Errorf("service traffic counters: %w", err)
			}
			for _, m := range parseCounted(data) {
				out = addCountedMember(out, at, f.fc.family, base, m)
			}
		}
	}
	return out, nil
}

// addCountedMember adds one member's counts to the sample of its address.
func addCountedMember(out []metrics.ServiceTrafficSample, at map[string]int, fam v1.IPFamily, set string, m counted) []metrics.ServiceTrafficSample {
	i, ok := at[m.member]
	if !ok {
		ns, svc, port, ok := metrics.ParseServiceTrafficComment(m.comment)
		_, pp, _ := strings.Cut(m.member, ",")
		proto, _, _ := strings.Cut(pp, ":")
		if !ok {
			return out
		}
		i = len(out)
		at[m.member] = i
		out = append(out, metrics.ServiceTrafficSample{Namespace: ns, Service: svc, Port: port,
			Protocol: strings.ToUpper(proto), Family: metrics.Family(fam)})
	}
	if set == setServiceConnections {
		out[i].Connections = m.packets
	} else {
		out[i].Packets, out[i].Bytes = m.packets, m.bytes
	}
	return out
}

// IPSetRunner is the real CounterSets: it execs the ipset binary with
// arguments only, in the caller's network namespace or, with Netns, in
// the named one (`ip netns exec`, for tests and tools).
type IPSetRunner struct {
	// Binary is the ipset program; empty means "ipset" from PATH.
	Binary string
	Netns  string
}

// Restore implements CounterSets.
func (r IPSetRunner) Restore(ctx context.Context, data []byte) error {
	_, err := r.run(ctx, data, "restore")
	return err
}

// Save implements CounterSets.
func (r IPSetRunner) Save(ctx context.Context, set string) ([]byte, error) {
	return r.run(ctx, nil, "save", set)
}

func (r IPSetRunner) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	bin := r.Binary
	if bin == "" {
		bin = "ipset"
	}
	if r.Netns != "" {
		args = append([]string{"netns", "exec", r.Netns, bin}, args...)
		bin = "ip"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ipset %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// destroyCounterSets removes the family's counter sets, once the chains
// that match them are gone (a set in use cannot be destroyed). A set that
// cannot be listed (it does not exist, or there is no ipset binary, so
// none was ever made) is left alone.
func destroyCounterSets(ctx context.Context, cs CounterSets, fam v1.IPFamily) error {
	if cs == nil {
		return nil
	}
	var cmds []string
	for _, base := range []string{setServiceTraffic, setServiceConnections} {
		name := trafficSetName(fam, base)
		if _, err := cs.Save(ctx, name); err == nil {
			cmds = append(cmds, "destroy "+name+"\n")
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if err := cs.Restore(ctx, []byte(strings.Join(cmds, ""))); err != nil {
		return fmt.Errorf("iptables cleanup: %s: destroy counter sets: %w", fam, err)
	}
	return nil
}
