package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mobyipvs "github.com/moby/ipvs"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/explain"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// runExplain is the real explain: the API through the daemon's client,
// the kernel of this network namespace, read only.
func runExplain(ctx context.Context, o *Options, req *explainRequest) error {
	if req.Trace {
		return runTrace(ctx, o, req)
	}
	nodeName, err := nodeName(o)
	if err != nil {
		return err
	}
	client, err := newClient(o)
	if err != nil {
		return err
	}
	objs, err := readObjects(ctx, client, o, req, nodeName)
	if err != nil {
		return err
	}
	dp, err := openDataplane(ctx, o, objs.Families)
	if err != nil {
		return err
	}
	rep := explain.Build(objs, dp, explain.InInterface)
	if err := selectPort(&rep, req.Port); err != nil {
		return err
	}
	rep.Write(req.Out, req.Verbose)
	if n := rep.Problems(); n > 0 {
		return fmt.Errorf("%s/%s: %d address(es) differ from what the API says", req.Namespace, req.Name, n)
	}
	return nil
}

// runTrace follows one packet through the live rules.
func runTrace(ctx context.Context, o *Options, req *explainRequest) error {
	fam := proxier.FamilyOf(req.Dst.Addr())
	dp, err := openDataplane(ctx, o, []v1.IPFamily{fam})
	if err != nil {
		return err
	}
	p := explain.Probe{Src: req.Src, Dst: req.Dst.Addr(), Port: req.Dst.Port(), Protocol: req.Protocol,
		FromNode: slices.Contains(dp.LocalAddrs(), req.Src), InInterface: req.InInterface}
	if !p.FromNode && p.InInterface == "" {
		p.InInterface = explain.InInterface(req.Src)
	}
	paths, err := dp.Trace(p)
	if err != nil {
		return fmt.Errorf("tracing %s -> %s: %w", p.Src, p, err)
	}
	explain.WriteTrace(req.Out, dp.Mode(), p, paths)
	return nil
}

// readObjects reads the Service, its EndpointSlices and this node's Node
// with the list and watch rights the daemon has (no get on Services).
func readObjects(ctx context.Context, client kubeapi.Client, o *Options, req *explainRequest, nodeName string) (explain.Objects, error) {
	svc, err := readService(ctx, client, req.Namespace, req.Name)
	if err != nil {
		return explain.Objects{}, err
	}
	sel := proxier.ServiceSelector(o.ServiceProxyName)
	if !sel.Matches(labels.Set(svc.Labels)) {
		return explain.Objects{}, fmt.Errorf("service %s/%s is not switchyard's on this node: its labels do not match %q", req.Namespace, req.Name, sel)
	}
	slices, err := readSlices(ctx, client, req.Namespace, req.Name, sel)
	if err != nil {
		return explain.Objects{}, err
	}
	node, err := client.Node(ctx, nodeName)
	if err != nil {
		klog.InfoS("Cannot read this node's Node: topology and node addresses unknown", "node", nodeName, "err", err)
		node = nil
	}
	var ips []netip.Addr
	if node != nil {
		ips = proxier.NodeInfoFromNode(node).Addresses
	}
	return explain.Objects{Service: svc, Slices: slices, Node: node, NodeName: nodeName,
		Families: explainFamilies(o, ips), NodePortAddresses: nodePortAddresses(o, ips)}, nil
}

// nodePortAddresses resolves --nodeport-addresses as the daemon does at
// start ("primary": the Node's addresses); unrestricted if that fails.
func nodePortAddresses(o *Options, nodeIPs []netip.Addr) []netip.Prefix {
	resolved := *o
	resolved.NodePortAddresses = slices.Clone(o.NodePortAddresses)
	if err := resolveNodePortAddresses(&resolved, primaryNodeIPs(nodeIPs, o.BindAddress)); err != nil {
		return nil
	}
	return resolved.NodePortAddresses
}

// errServiceNotFound is returned for a Service the API does not have.
var errServiceNotFound = errors.New("service not found")

func readService(ctx context.Context, client kubeapi.Client, ns, name string) (*v1.Service, error) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("metadata.namespace", ns), fields.OneTermEqualSelector("metadata.name", name))
	lw := client.ListerWatcher(kubeapi.Services, func(opts *metav1.ListOptions) { opts.FieldSelector = sel.String() })
	obj, err := cache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading service %s/%s: %w", ns, name, err)
	}
	list, ok := obj.(*v1.ServiceList)
	if !ok {
		return nil, fmt.Errorf("reading service %s/%s: got %T", ns, name, obj)
	}
	for i := range list.Items {
		if list.Items[i].Namespace == ns && list.Items[i].Name == name {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %s/%s", errServiceNotFound, ns, name)
}

func readSlices(ctx context.Context, client kubeapi.Client, ns, name string, sel labels.Selector) ([]*discovery.EndpointSlice, error) {
	byService, _ := labels.NewRequirement(discovery.LabelServiceName, "=", []string{name})
	lsel := sel.Add(*byService).String()
	lw := client.ListerWatcher(kubeapi.EndpointSlices, func(opts *metav1.ListOptions) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.namespace", ns).String()
		opts.LabelSelector = lsel
	})
	obj, err := cache.ToListerWatcherWithContext(lw).ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the endpoint slices of %s/%s: %w", ns, name, err)
	}
	list, ok := obj.(*discovery.EndpointSliceList)
	if !ok {
		return nil, fmt.Errorf("reading endpoint slices: got %T", obj)
	}
	out := make([]*discovery.EndpointSlice, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Namespace == ns {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// openDataplane reads the live rules of the active mode, read only.
func openDataplane(ctx context.Context, o *Options, fams []v1.IPFamily) (explain.Dataplane, error) {
	local, err := explain.LocalAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this node's addresses: %w", err)
	}
	s := specOf(o.Mode)
	if s.explain == nil {
		return nil, fmt.Errorf("explain does not support %s mode yet (%s only)", o.Mode, explainModes())
	}
	return s.explain(ctx, o, fams, local)
}

// explainModes lists the modes explain reads: "iptables, nftables, userspace".
func explainModes() string {
	var names []string
	for _, s := range modes {
		if s.explain != nil {
			names = append(names, string(s.name))
		}
	}
	return strings.Join(names, ", ")
}

// openIPTablesMode reads the iptables mode's rules.
func openIPTablesMode(ctx context.Context, o *Options, fams []v1.IPFamily, local []netip.Addr) (explain.Dataplane, error) {
	return openIPTables(ctx, o.Mode, fams, local)
}

// openNFTables reads the nftables mode's table over netlink.
func openNFTables(ctx context.Context, _ *Options, fams []v1.IPFamily, local []netip.Addr) (explain.Dataplane, error) {
	return explain.ReadNFTables(ctx, nftables.NewNetlinkConn(), nftables.TableName, fams, local)
}

// openUserspace reads the userspace mode: its iptables rules, the
// sockets listening in this namespace, and the relay table the daemon
// serves on its metrics address.
func openUserspace(ctx context.Context, o *Options, fams []v1.IPFamily, local []netip.Addr) (explain.Dataplane, error) {
	rules, err := openIPTables(ctx, o.Mode, fams, local)
	if err != nil {
		return nil, err
	}
	sockets, err := explain.ReadSockets()
	if err != nil {
		return nil, fmt.Errorf("listing this node's listening sockets: %w", err)
	}
	cfg := explain.UserspaceConfig{Rules: rules, Listeners: sockets, Relays: relayReader(o.MetricsBindAddress)}
	if o.UserspaceFallback {
		cfg.SentinelMark = 1 << userspace.DefaultMarkBit
	}
	return explain.ReadUserspace(ctx, cfg), nil
}

// relayReader reads the daemon's relay table from its metrics address.
func relayReader(bind string) explain.RelayReader {
	if bind == "" {
		return failedRelays{errors.New("the daemon serves its relay table on --metrics-bind-address, which this configuration leaves empty")}
	}
	r, err := explain.NewHTTPRelays(bind)
	if err != nil {
		return failedRelays{err}
	}
	return r
}

// failedRelays is a relay table that cannot be read.
type failedRelays struct{ err error }

func (f failedRelays) RelayTable(context.Context) (userspace.RelayTable, error) {
	return userspace.RelayTable{}, f.err
}

// openIPTables saves the live iptables rules of each family whose tools
// the node has; mode names the proxy mode they are read for.
func openIPTables(ctx context.Context, mode Mode, fams []v1.IPFamily, local []netip.Addr) (explain.Dataplane, error) {
	r, exists, err := iptablesReader()
	if err != nil {
		return nil, err
	}
	return explain.ReadIPTables(ctx, string(mode), r, fams, exists, local)
}

// iptablesReader is the daemon's iptables runner, with the check that
// keeps a legacy save from creating a missing table.
func iptablesReader() (runner.Interface, explain.TableExists, error) {
	r, err := runner.New(runner.Options{})
	if err != nil {
		return nil, nil, err
	}
	var exists explain.TableExists
	if r.Mode() == runner.ModeLegacy {
		exists = explain.LegacyTableExists
	}
	return r, exists, nil
}

// openIPVS reads the ipvs mode: its companion iptables rules, `ipset
// save` and the IPVS table over netlink (GetServices and GetDestinations
// only). Without /proc/net/ip_vs IPVS is not loaded: no handle is opened
// (that could load the module) and no address is load-balanced.
func openIPVS(ctx context.Context, _ *Options, fams []v1.IPFamily, local []netip.Addr) (explain.Dataplane, error) {
	r, exists, err := iptablesReader()
	if err != nil {
		return nil, err
	}
	cfg := explain.IPVSConfig{IPSets: ipset.New(""), IPTables: r, Exists: exists, Families: fams, Local: local}
	if ipvsLoaded() {
		h, err := mobyipvs.New("")
		if err != nil {
			return nil, fmt.Errorf("opening IPVS: %w", err)
		}
		defer h.Close()
		cfg.IPVS = h
	} else {
		klog.InfoS("IPVS is not loaded in this kernel (no /proc/net/ip_vs): no address is load-balanced")
	}
	return explain.ReadIPVS(ctx, cfg)
}
