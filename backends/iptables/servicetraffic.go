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
// NodePorts are counted the same way in a second pair of sets, of type
// hash:net,port, matched from the sub-chain KUBE-NODEPORT-TRAFFIC, which
// KUBE-SERVICE-TRAFFIC enters under the same destination conditions as
// nat KUBE-SERVICES' jump to KUBE-NODEPORTS (local addresses, inside
// --nodeport-addresses): whatever address of the node a client uses, a
// NodePort packet matches one of the port's two members, the halves of
// the family's address space (0.0.0.0/1 and 128.0.0.0/1; ::/1 and
// 8000::/1), since ipset allows no /0 and a port-only set type would
// ignore the protocol.
//
// The sets are kept by difference (members added and deleted, never
// flushed), so counts survive syncs and restarts; a Service's members go
// with it. Counted: packets from clients to the service address or
// NodePort, before any rejection for want of endpoints; not replies.
const (
	chainServiceTraffic  = "KUBE-SERVICE-TRAFFIC"
	chainNodePortTraffic = "KUBE-NODEPORT-TRAFFIC"
	// Set names, prefixed "KUBE-6-" in IPv6 as the ipvs mode's.
	setServiceTraffic      = "KUBE-SERVICE-TRAFFIC"
	setServiceConnections  = "KUBE-SERVICE-CONNS"
	setNodePortTraffic     = "KUBE-NODEPORT-TRAFFIC"
	setNodePortConnections = "KUBE-NODEPORT-CONNS"
)

// counterKind is one pair of counter sets: one counts every packet to
// its members, the other each new connection.
type counterKind struct {
	traffic, conns string // set names (IPv4)
	ipsetType      string
	// members adds the port's members, each "ADDR,proto:port".
	members func(fam v1.IPFamily, sp *proxier.ServicePort, proto string, add func(string))
}

var counterKinds = []counterKind{
	{setServiceTraffic, setServiceConnections, "hash:ip,port", serviceAddrMembers},
	{setNodePortTraffic, setNodePortConnections, "hash:net,port", nodePortMembers},
}

// sets are the kind's two set names in the family.
func (k counterKind) sets(fam v1.IPFamily) []string {
	return []string{trafficSetName(fam, k.traffic), trafficSetName(fam, k.conns)}
}

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

// trafficChain is mangle KUBE-SERVICE-TRAFFIC and its NodePort
// sub-chain, when counting.
func trafficChain(fc *familyConfig) []*chainRules {
	if !fc.serviceTraffic {
		return nil
	}
	rules := setMatchRules(chainServiceTraffic, fc.family, counterKinds[0], "service")
	for _, dst := range nodePortTrafficDsts(fc) {
		rules = append(rules, rule(chainServiceTraffic, strings.TrimSpace(dst+" -m addrtype --dst-type LOCAL -j "+chainNodePortTraffic)))
	}
	return []*chainRules{
		newChain(tableMangle, chainServiceTraffic, rules...),
		newChain(tableMangle, chainNodePortTraffic, setMatchRules(chainNodePortTraffic, fc.family, counterKinds[1], "nodeport")...),
	}
}

// setMatchRules match the kind's two sets: every packet, and new
// connections.
func setMatchRules(chain string, fam v1.IPFamily, k counterKind, what string) []string {
	sets := k.sets(fam)
	return []string{
		rule(chain, comment("count "+what+" traffic"), "-m set --match-set", sets[0], "dst,dst"),
		rule(chain, comment("count "+what+" connections"), "-m conntrack --ctstate NEW -m set --match-set", sets[1], "dst,dst"),
	}
}

// nodePortTrafficDsts are the destination matches under which a packet
// to a local address is NodePort traffic, as nodePortsJumps decides it,
// with prefixes inside other prefixes dropped so that no packet is
// counted twice.
func nodePortTrafficDsts(fc *familyConfig) []string {
	prefixes, all := nodePortPrefixes(fc)
	if all {
		return []string{strings.TrimSpace(allNodePortsDst(fc))}
	}
	var out []string
	for i, p := range prefixes {
		covered := false
		for j, q := range prefixes {
			inside := q.Bits() < p.Bits() && q.Contains(p.Addr())
			covered = covered || inside || (q == p && j < i)
		}
		if !covered {
			out = append(out, "-d "+p.String())
		}
	}
	return out
}

// trafficJumps send every packet of the family through the counters.
func trafficJumps() []jumpRule {
	args := []string{"-m", "comment", "--comment", "kubernetes service traffic counters", "-j", chainServiceTraffic}
	return []jumpRule{
		{table: tableMangle, from: "PREROUTING", to: chainServiceTraffic, args: args},
		{table: tableMangle, from: "OUTPUT", to: chainServiceTraffic, args: args},
	}
}

// counterMembers are the members each kind's sets must hold for the
// state: "ADDR,proto:port" -> comment.
func counterMembers(fam v1.IPFamily, st *proxier.State) []map[string]string {
	out := make([]map[string]string, len(counterKinds))
	for i := range out {
		out[i] = map[string]string{}
	}
	for _, sp := range st.Services {
		proto := strings.ToLower(string(sp.Protocol))
		if sp.Port == 0 || (proto != "tcp" && proto != "udp" && proto != "sctp") {
			continue
		}
		if cip, ok := sp.ClusterIP(fam); !ok || !cip.IsValid() {
			continue
		}
		c := metrics.ServiceTrafficComment(sp.Name.Namespace, sp.Name.Name, sp.Name.Port, sp.Port)
		for i, k := range counterKinds {
			k.members(fam, sp, proto, func(m string) { out[i][m] = c })
		}
	}
	return out
}

// serviceAddrMembers are the cluster IP, external IPs and load-balancer
// IPs of the port.
func serviceAddrMembers(fam v1.IPFamily, sp *proxier.ServicePort, proto string, add func(string)) {
	cip, _ := sp.ClusterIP(fam)
	addrs := slices.Concat([]netip.Addr{cip}, proxier.AddrsOfFamily(sp.ExternalIPs, fam), proxier.AddrsOfFamily(sp.LoadBalancerIPs, fam))
	for _, a := range addrs {
		add(a.Unmap().String() + "," + proto + ":" + strconv.Itoa(int(sp.Port)))
	}
}

// nodePortMembers are the NodePort's two members, the halves of the
// family's address space.
func nodePortMembers(fam v1.IPFamily, sp *proxier.ServicePort, proto string, add func(string)) {
	if sp.NodePort == 0 {
		return
	}
	halves := []string{"0.0.0.0/1", "128.0.0.0/1"}
	if fam == v1.IPv6Protocol {
		halves = []string{"::/1", "8000::/1"}
	}
	for _, h := range halves {
		add(h + "," + proto + ":" + strconv.Itoa(int(sp.NodePort)))
	}
}

// counterSetsSync keeps one family's counter sets equal to the state.
type counterSetsSync struct {
	sets CounterSets
	fam  v1.IPFamily
	// written is what each kind's sets hold (member -> comment); nil
	// until read from the kernel.
	written []map[string]string
	// created is set once a restore created every set (or found them).
	created bool
}

// sync writes the difference between the state and the sets: creates
// them if missing (before any rule refers to them), deletes members gone
// or renamed, adds the new ones. A partial sync in which no service port
// changed (endpoints only) has nothing to do: the members are service
// addresses and NodePorts, and recomputing them costs ~12 ms at 10k
// services.
func (c *counterSetsSync) sync(ctx context.Context, st *proxier.State, diff *proxier.Diff) error {
	if c.created && diff != nil && !diff.Full && !diff.ServicesChanged {
		return nil
	}
	if c.written == nil {
		c.written = c.read(ctx)
	}
	want := counterMembers(c.fam, st)
	var b bytes.Buffer
	for i, k := range counterKinds {
		for _, set := range k.sets(c.fam) {
			writeMemberDiff(&b, set, c.written[i], want[i])
		}
	}
	if b.Len() == 0 && c.created {
		return nil
	}
	// Creating an existing set with -exist does nothing; a set deleted
	// behind our back comes back (empty) before the rules name it.
	var creates bytes.Buffer
	for _, k := range counterKinds {
		for _, set := range k.sets(c.fam) {
			fmt.Fprintf(&creates, "create %s %s family %s counters comment -exist\n", set, k.ipsetType, ipsetFamily(c.fam))
		}
	}
	if err := c.sets.Restore(ctx, append(creates.Bytes(), b.Bytes()...)); err != nil {
		c.written, c.created = nil, false // read again next time
		return fmt.Errorf("service traffic ipsets: %w", err)
	}
	c.written, c.created = want, true
	return nil
}

// writeMemberDiff writes the restore lines that take set from have to
// want.
func writeMemberDiff(b *bytes.Buffer, set string, have, want map[string]string) {
	for _, m := range slices.Sorted(maps.Keys(have)) {
		if cm, ok := want[m]; !ok || cm != have[m] {
			fmt.Fprintf(b, "del %s %s -exist\n", set, m)
		}
	}
	for _, m := range slices.Sorted(maps.Keys(want)) {
		if cm, ok := have[m]; !ok || cm != want[m] {
			fmt.Fprintf(b, "add %s %s comment %q -exist\n", set, m, want[m])
		}
	}
}

// read gives what each kind's traffic set holds (member -> comment);
// empty for a set that does not exist, which sync then creates.
func (c *counterSetsSync) read(ctx context.Context) []map[string]string {
	out := make([]map[string]string, len(counterKinds))
	for i, k := range counterKinds {
		out[i] = map[string]string{}
		data, err := c.sets.Save(ctx, k.sets(c.fam)[0])
		if err != nil {
			continue // no such set yet
		}
		for _, m := range parseCounted(data) {
			out[i][m.member] = m.comment
		}
	}
	return out
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

// samples appends what `ipset save` of each of the family's counter sets
// shows now, one sample per service address or NodePort.
func (c *counterSetsSync) samples(ctx context.Context, out []metrics.ServiceTrafficSample) ([]metrics.ServiceTrafficSample, error) {
	at := map[string]int{}
	for _, k := range counterKinds {
		for i, set := range k.sets(c.fam) {
			data, err := c.sets.Save(ctx, set)
			if err != nil {
				return nil, fmt.Errorf("service traffic counters: %w", err)
			}
			for _, m := range parseCounted(data) {
				out = addCountedMember(out, at, c.fam, k.traffic+" "+m.member, i == 1, m)
			}
		}
	}
	return out, nil
}

// addCountedMember adds one member's counts to the sample of its address
// (key: the member in its kind).
func addCountedMember(out []metrics.ServiceTrafficSample, at map[string]int, fam v1.IPFamily, key string, conns bool, m counted) []metrics.ServiceTrafficSample {
	i, ok := at[key]
	if !ok {
		ns, svc, port, ok := metrics.ParseServiceTrafficComment(m.comment)
		_, pp, _ := strings.Cut(m.member, ",")
		proto, _, _ := strings.Cut(pp, ":")
		if !ok {
			return out
		}
		i = len(out)
		at[key] = i
		out = append(out, metrics.ServiceTrafficSample{Namespace: ns, Service: svc, Port: port,
			Protocol: strings.ToUpper(proto), Family: metrics.Family(fam)})
	}
	if conns {
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
	for _, k := range counterKinds {
		for _, name := range k.sets(fam) {
			if _, err := cs.Save(ctx, name); err == nil {
				cmds = append(cmds, "destroy "+name+"\n")
			}
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
