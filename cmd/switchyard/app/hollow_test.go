package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/spf13/cobra"
	"github.com/switchyard-proxy/switchyard/backends/recording"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
)

// executeHollow runs `switchyard hollow args...` with a recording run
// function.
func executeHollow(t *testing.T, args ...string) (*hollowRequest, *Options, error) {
	t.Helper()
	return executeSubcommand(t, func(run func(context.Context, *Options, *hollowRequest) error, warn func(string)) *cobra.Command {
		return newHollowCommand(run, warn)
	}, args...)
}

func TestHollowArgs(t *testing.T) {
	req, o, err := executeHollow(t, "--count=7", "--node-name-prefix=h-", "--first-index=10", "--kubeconfig=/k")
	if err != nil {
		t.Fatal(err)
	}
	if req.Count != 7 || req.name(0) != "h-10" || req.name(6) != "h-16" || o.Kubeconfig != "/k" {
		t.Errorf("request %+v, kubeconfig %q", req, o.Kubeconfig)
	}
	for _, bad := range [][]string{
		{"--count=0"}, {"--count=-1"}, {"--first-index=-1"}, {fmt.Sprintf("--count=%d", maxHollowCount+1)}, {"--node-name-prefix=Bad_"},
		{"--cleanup"}, {"--init-only"}, {"--proxy-mode=bogus"}, {"extra"},
	} {
		if _, _, err := executeHollow(t, bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the hollow nodes' reports.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) waitFor(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(s.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in:\n%s", what, s.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hollowSlice(ips ...string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(v1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: ptr(true)}})
	}
	return s
}

// Three hollow nodes, each its own proxier on its own client, sync the
// same objects, report once ready, and each syncs an endpoint change.
func TestHollowNodesSyncEachChange(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	cs := fake.NewClientset(svc, hollowSlice("10.1.0.1"))
	clients := 0
	newClient := func(*Options) (kubeapi.Client, error) {
		clients++
		return clientset.New(cs), nil
	}
	o := mustOptions(t)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runHollowNodes(ctx, o, &hollowRequest{Count: 3, Prefix: "h-", Out: out}, newClient) }()

	out.waitFor(t, "hollow-ready", func(s string) bool { return strings.Contains(s, "hollow-ready count=3 ") })
	for i := range 3 {
		want := fmt.Sprintf("hollow-sync node=h-%d ", i)
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "full=true changed=1 services=1 endpoints=1") {
			t.Errorf("no full sync of h-%d with the service:\n%s", i, out.String())
		}
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("ns").Update(ctx, hollowSlice("10.1.0.1", "10.1.0.2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "each node's sync of the change", func(s string) bool {
		return strings.Count(s, "full=false changed=1 services=1 endpoints=2 names=ns/web:http") == 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runHollowNodes: %v", err)
	}
	if clients != 3 || o.PrimaryFamily != v1.IPv4Protocol || len(o.Families) != 1 {
		t.Errorf("%d clients, families %s %v", clients, o.PrimaryFamily, o.Families)
	}
	events, err := cs.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(events.Items) != 3 {
		t.Errorf("Starting events: %d, %v; want one per node", len(events.Items), err)
	}
}

func TestHollowClientFailureStops(t *testing.T) {
	o := mustOptions(t)
	err := runHollowNodes(t.Context(), o, &hollowRequest{Count: 2, Prefix: "h-", Out: &syncBuffer{}}, func(*Options) (kubeapi.Client, error) {
		return nil, fmt.Errorf("no API")
	})
	if err == nil || !strings.Contains(err.Error(), "no API") {
		t.Errorf("got %v, want the client's error", err)
	}
}

func TestSettleHollowMemoryScalesToOneNode(t *testing.T) {
	r := &hollowReporter{out: &syncBuffer{}, count: 2, synced1: map[string]bool{}}
	var settledFor int
	r.settle = func(n int) (uint64, int) { settledFor = n; return 1 << 20, 50 }
	r.synced("a", recordingSync())
	if settledFor != 0 {
		t.Fatal("settled before every node synced")
	}
	r.synced("a", recordingSync())
	r.synced("b", recordingSync())
	if settledFor != 2 || !strings.Contains(r.out.(*syncBuffer).String(), "hollow-ready count=2 heap_live_bytes=1048576 gc_percent=50") {
		t.Errorf("settled for %d:\n%s", settledFor, r.out.(*syncBuffer).String())
	}
}

// mustOptions are the options of `switchyard hollow` without flags.
func mustOptions(t *testing.T) *Options {
	t.Helper()
	_, o, err := executeHollow(t)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func recordingSync() recording.Sync { return recording.Sync{At: time.Now(), Full: true} }

// With --profiling the hollow process serves pprof and the clients'
// request metrics on the metrics address, with the mutex (and block)
// profiles sampling.
func TestHollowProfilingServer(t *testing.T) {
	t.Cleanup(func() {
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, o, err := executeHollow(t, "--profiling", "--metrics-bind-address="+addr)
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runHollowNodes(ctx, o, &hollowRequest{Count: 1, Prefix: "h-", Out: &syncBuffer{}}, func(*Options) (kubeapi.Client, error) {
			return clientset.New(cs), nil
		})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/debug/pprof/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("pprof: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no profiling server on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := httpBody(t, "http://"+addr+"/debug/pprof/mutex?debug=1"); !strings.Contains(got, "sampling period=10\n") {
		t.Errorf("the mutex profile does not sample one contention in 10:\n%.300s", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}
