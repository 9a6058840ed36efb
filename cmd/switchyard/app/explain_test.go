package app

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/spf13/cobra"
	"github.com/switchyard-proxy/switchyard/internal/explain"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// executeSubcommand runs a subcommand built by newCmd with args and a run
// function that records what it was given.
func executeSubcommand[R any](t *testing.T, newCmd func(run func(context.Context, *Options, *R) error, warn func(string)) *cobra.Command, args ...string) (*R, *Options, error) {
	t.Helper()
	var got *R
	var opts *Options
	cmd := newCmd(func(_ context.Context, o *Options, req *R) error {
		got, opts = req, o
		return nil
	}, func(string) {})
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	return got, opts, cmd.Execute()
}

// executeExplain runs `switchyard explain args...` with a recording run
// function.
func executeExplain(t *testing.T, args ...string) (*explainRequest, *Options, error) {
	t.Helper()
	return executeSubcommand(t, func(run func(context.Context, *Options, *explainRequest) error, warn func(string)) *cobra.Command {
		return newExplainCommand(run, warn)
	}, args...)
}

func TestExplainArgs(t *testing.T) {
	req, o, err := executeExplain(t, "default/web:http", "--proxy-mode=nftables", "--kubeconfig=/k")
	if err != nil {
		t.Fatal(err)
	}
	if req.Namespace != "default" || req.Name != "web" || req.Port != "http" || o.Mode != ModeNFTables || o.Kubeconfig != "/k" {
		t.Errorf("request %+v, mode %s, kubeconfig %q", req, o.Mode, o.Kubeconfig)
	}
	req, _, err = executeExplain(t, "--trace", "10.244.1.5", "10.96.0.10:80/udp")
	if err != nil {
		t.Fatal(err)
	}
	if !req.Trace || req.Src != netip.MustParseAddr("10.244.1.5") || req.Dst != netip.MustParseAddrPort("10.96.0.10:80") || req.Protocol != v1.ProtocolUDP {
		t.Errorf("trace request %+v", req)
	}
	for _, bad := range [][]string{
		{"web"}, {"default/"}, {"a/b/c"}, {"default/web", "extra"},
		{"--trace", "10.0.0.1"}, {"--trace", "10.0.0.1", "10.96.0.10:80"}, {"--trace", "10.0.0.1", "10.96.0.10:80/icmp"},
		{"--trace", "10.0.0.1", "[fd00::1]:80/tcp"}, {"default/web", "--cleanup"}, {"default/web", "--proxy-mode=bogus"},
	} {
		if _, _, err := executeExplain(t, bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func testClient(objs ...interface{ GetName() string }) *clientset.Client {
	cs := fake.NewClientset()
	ctx := context.Background()
	for _, o := range objs {
		switch x := o.(type) {
		case *v1.Service:
			_, _ = cs.CoreV1().Services(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
		case *discovery.EndpointSlice:
			_, _ = cs.DiscoveryV1().EndpointSlices(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
		}
	}
	return clientset.New(cs)
}

func svcNamed(ns, name string, labels map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, Ports: []v1.ServicePort{{Port: 80}}}}
}

func sliceOf(ns, name, svc string) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{discovery.LabelServiceName: svc}}, AddressType: discovery.AddressTypeIPv4}
}

// TestReadObjects: the Service and only its own slices; a clear error
// for a Service that does not exist or that another proxy serves.
func TestReadObjects(t *testing.T) {
	client := testClient(svcNamed("default", "web", nil), svcNamed("other", "web", nil),
		svcNamed("default", "theirs", map[string]string{proxier.LabelServiceProxyName: "someone-else"}),
		sliceOf("default", "web-1", "web"), sliceOf("default", "web-2", "web"), sliceOf("other", "web-1", "web"), sliceOf("default", "db-1", "db"))
	o := &Options{}
	ctx := context.Background()
	objs, err := readObjects(ctx, client, o, &explainRequest{Namespace: "default", Name: "web"}, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if objs.Service.Namespace != "default" || len(objs.Slices) != 2 || objs.Node != nil || len(objs.Families) == 0 {
		t.Errorf("objects %+v", objs)
	}
	_, err = readObjects(ctx, client, o, &explainRequest{Namespace: "default", Name: "nope"}, "node-a")
	if !errors.Is(err, errServiceNotFound) || !strings.Contains(err.Error(), "default/nope") {
		t.Errorf("missing service: %v", err)
	}
	if _, err := readObjects(ctx, client, o, &explainRequest{Namespace: "default", Name: "theirs"}, "node-a"); err == nil {
		t.Error("another proxy's Service explained")
	}
}

func TestSelectPort(t *testing.T) {
	mk := func(name string, port uint16) explain.PortReport {
		return explain.PortReport{Expected: explain.ExpectedPort{Port: &proxier.ServicePort{Name: proxier.ServicePortName{Port: name}, Port: port}}}
	}
	base := explain.Report{Service: explain.Objects{Service: svcNamed("default", "web", nil)}, Ports: []explain.PortReport{mk("http", 80), mk("metrics", 9090)}}
	for _, tc := range []struct {
		arg  string
		want int
	}{{"", 2}, {"http", 1}, {"9090", 1}, {"https", 0}} {
		rep := base
		err := selectPort(&rep, tc.arg)
		if (err != nil) != (tc.want == 0) || (err == nil && len(rep.Ports) != tc.want) {
			t.Errorf("%q: %d ports, err %v", tc.arg, len(rep.Ports), err)
		}
	}
}

// TestExplainModes: every mode has a dataplane reader; in userspace mode
// a daemon without a metrics address has no relay table to read.
func TestExplainModes(t *testing.T) {
	for _, s := range modes {
		if s.explain == nil {
			t.Errorf("%s mode: explain has no reader", s.name)
		}
	}
	if got := explainModes(); got != modeNames() {
		t.Errorf("explain reads %q, want every mode %q", got, modeNames())
	}
	_, err := relayReader("").RelayTable(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--metrics-bind-address") {
		t.Errorf("no metrics address: %v", err)
	}
	if r, ok := relayReader("0.0.0.0:10249").(*explain.HTTPRelays); !ok || r.URL != "http://127.0.0.1:10249/debug/switchyard/relays" {
		t.Errorf("relay reader %+v", r)
	}
}
