package framework

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The testdata/kube-apiserver-v1.37.1-*.pb files are the etcd values of a
// Service, its EndpointSlice and its IPAddress that kube-apiserver v1.37.1
// stored when they were created through its API (shaped like TestScale's
// background objects): what the seeded objects must look like. The
// "-ipv6" ones are of a single-stack IPv6 Service (the suite's dual-stack
// service range) with its IPv6 slice "bg-00000-6".
func readStored(t *testing.T, what string) runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "kube-apiserver-v1.37.1-"+what+".pb"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := DecodeStored(data)
	if err != nil {
		t.Fatalf("decode %s: %v", what, err)
	}
	return obj
}

// goldenSuffix is the testdata files' suffix of family f.
func goldenSuffix(f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol {
		return "-ipv6"
	}
	return ""
}

func goldenShapes() (*corev1.Service, *discoveryv1.EndpointSlice) {
	return goldenShapesOf(corev1.IPv4Protocol)
}

// goldenShapesOf is the Service and slice the golden files of family f
// were created from.
func goldenShapesOf(f corev1.IPFamily) (*corev1.Service, *discoveryv1.EndpointSlice) {
	svc := NewService("seed-golden", "bg-00000",
		NewServicePort("tcp", corev1.ProtocolTCP, 80, EchoPort),
		NewServicePort("tcp1", corev1.ProtocolTCP, 81, EchoPort+1))
	ports := []discoveryv1.EndpointPort{
		NewEndpointPort("tcp", corev1.ProtocolTCP, EchoPort),
		NewEndpointPort("tcp1", corev1.ProtocolTCP, EchoPort+1),
	}
	if f == corev1.IPv6Protocol {
		ShapeIPv6.ApplyTo(svc)
		s := NewEndpointSlice(svc, "6", ports, ReadyEndpoint("fd00:250::1", "node-a"))
		s.AddressType = discoveryv1.AddressTypeIPv6
		return svc, s
	}
	return svc, NewEndpointSlice(svc, "1", ports, ReadyEndpoint("10.250.0.1", "node-a"))
}

// ignoreServerOnly leaves out what differs between any two creations: uid,
// times, managed fields, and the slice's trigger-time annotation.
var ignoreServerOnly = cmp.Options{
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "CreationTimestamp", "ManagedFields", "Annotations"),
	cmpopts.IgnoreFields(metav1.TypeMeta{}, "Kind", "APIVersion"),
}

func TestSeedObjectsMatchTheApiserversStored(t *testing.T) {
	for _, f := range []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol} {
		t.Run(string(f), func(t *testing.T) { testSeedObjectsMatch(t, f) })
	}
}

func testSeedObjectsMatch(t *testing.T, f corev1.IPFamily) {
	sfx := goldenSuffix(f)
	wantSvc := readStored(t, "service"+sfx).(*corev1.Service)
	wantSlice := readStored(t, "endpointslice"+sfx).(*discoveryv1.EndpointSlice)
	wantIP := readStored(t, "ipaddress"+sfx).(*networkingv1.IPAddress)
	ip := netip.MustParseAddr(wantSvc.Spec.ClusterIP)
	if got := FamilyOf(ip.String()); got != f {
		t.Fatalf("golden service of %s has %s ClusterIP %s", f, got, ip)
	}
	shape, sliceShape := goldenShapesOf(f)
	now := time.Now()
	svc, addr, err := SeedService(shape, ip, now)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantSvc, svc, ignoreServerOnly); d != "" {
		t.Errorf("service (-apiserver +seeded):\n%s", d)
	}
	if d := cmp.Diff(wantSlice, SeedEndpointSlice(sliceShape, now), ignoreServerOnly); d != "" {
		t.Errorf("endpointslice (-apiserver +seeded):\n%s", d)
	}
	if d := cmp.Diff(wantIP, addr, ignoreServerOnly); d != "" {
		t.Errorf("ipaddress (-apiserver +seeded):\n%s", d)
	}
	if svc.UID == "" || addr.UID == "" || svc.UID == addr.UID || !addr.CreationTimestamp.Equal(&svc.CreationTimestamp) {
		t.Errorf("uids %q %q, created %v %v", svc.UID, addr.UID, svc.CreationTimestamp, addr.CreationTimestamp)
	}
	if shape.Spec.ClusterIP != "" || shape.UID != "" {
		t.Errorf("SeedService changed its argument: %+v", shape)
	}
}

func TestEncodeForStorage(t *testing.T) {
	for _, what := range []string{"service", "endpointslice", "ipaddress", "service-ipv6", "endpointslice-ipv6", "ipaddress-ipv6"} {
		want, err := os.ReadFile(filepath.Join("testdata", "kube-apiserver-v1.37.1-"+what+".pb"))
		if err != nil {
			t.Fatal(err)
		}
		obj := readStored(t, what)
		got, err := EncodeForStorage(obj)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		// The same object encodes to the apiserver's very bytes: envelope,
		// apiVersion and kind included.
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoded\n%q\nthe apiserver stored\n%q", what, got, want)
		}
	}
}

func TestEncodeForStorageOfABareObject(t *testing.T) {
	shape, _ := goldenShapes()
	svc, _, err := SeedService(shape, netip.MustParseAddr("10.96.1.0"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodeForStorage(svc) // TypeMeta empty, as built
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("k8s\x00\n\r\n\x02v1\x12\aService")) {
		t.Errorf("no protobuf envelope with v1/Service: %q", data[:min(len(data), 24)])
	}
	back, err := DecodeStored(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(svc, back, cmpopts.IgnoreFields(metav1.TypeMeta{}, "Kind", "APIVersion")); d != "" {
		t.Errorf("round trip:\n%s", d)
	}
}

func TestStorageKey(t *testing.T) {
	svc, s := goldenShapes()
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.1.2"}}
	for obj, want := range map[runtime.Object]string{
		svc: "/registry/services/specs/seed-golden/bg-00000",
		s:   "/registry/endpointslices/seed-golden/bg-00000-1",
		ip:  "/registry/ipaddresses/10.96.1.2",
	} {
		if got, err := StorageKey(obj); got != want || err != nil {
			t.Errorf("%T: %q, %v; want %q", obj, got, err, want)
		}
	}
	if _, err := StorageKey(&corev1.Pod{}); err == nil {
		t.Error("a Pod got a key")
	}
}

func TestSeedServiceRefuses(t *testing.T) {
	svc, _ := goldenShapes()
	svc.Spec.Type = corev1.ServiceTypeNodePort
	if _, _, err := SeedService(svc, netip.MustParseAddr("10.96.1.0"), time.Now()); err == nil {
		t.Error("a NodePort Service was seeded")
	}
	svc.Spec.Type = ""
	for _, a := range []string{"::ffff:10.96.1.0"} {
		if _, _, err := SeedService(svc, netip.MustParseAddr(a), time.Now()); err == nil {
			t.Errorf("%s was taken", a)
		}
	}
	if _, _, err := SeedService(svc, netip.Addr{}, time.Now()); err == nil {
		t.Error("the zero address was taken")
	}
	out, _, err := SeedService(svc, netip.MustParseAddr("10.96.1.0"), time.Now())
	if err != nil || out.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("an empty type: %v, %v", out.Spec.Type, err)
	}
	// A Service that names no family takes the address's.
	out, addr, err := SeedService(svc, netip.MustParseAddr("fd00:10:96::100"), time.Now())
	if err != nil || !slices.Equal(out.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv6Protocol}) ||
		addr.Labels[networkingv1.LabelIPAddressFamily] != "IPv6" || addr.Name != "fd00:10:96::100" {
		t.Errorf("IPv6 for a Service without families: %v, %v, %v", out.Spec.IPFamilies, addr.Labels, err)
	}
	v6, _ := goldenShapesOf(corev1.IPv6Protocol)
	if _, _, err := SeedService(v6, netip.MustParseAddr("10.96.1.0"), time.Now()); err == nil {
		t.Error("an IPv6 Service was seeded on an IPv4 address")
	}
	for _, p := range []corev1.IPFamilyPolicy{corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack} {
		dual := svc.DeepCopy()
		dual.Spec.IPFamilyPolicy = &p
		if _, _, err := SeedService(dual, netip.MustParseAddr("10.96.1.0"), time.Now()); err == nil {
			t.Errorf("a %s Service was seeded", p)
		}
	}
	dual := svc.DeepCopy()
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	if _, _, err := SeedService(dual, netip.MustParseAddr("10.96.1.0"), time.Now()); err == nil {
		t.Error("a Service of two families was seeded")
	}
}

func TestSeedClusterIPs(t *testing.T) {
	ip := netip.MustParseAddr
	taken := map[netip.Addr]bool{ip("10.96.1.1"): true, ip("10.96.0.1"): true}
	got, err := SeedClusterIPs(netip.MustParsePrefix("10.96.0.0/16"), 3, taken)
	if want := []netip.Addr{ip("10.96.1.0"), ip("10.96.1.2"), ip("10.96.1.3")}; err != nil || !slices.Equal(got, want) {
		t.Errorf("/16: %v, %v; want %v", got, err, want)
	}
	// A /28 has no static band: .1 to .14.
	got, err = SeedClusterIPs(netip.MustParsePrefix("10.0.0.5/28"), 14, nil)
	if err != nil || got[0] != ip("10.0.0.1") || got[13] != ip("10.0.0.14") {
		t.Errorf("/28: %v, %v", got, err)
	}
	if _, err := SeedClusterIPs(netip.MustParsePrefix("10.0.0.0/28"), 15, nil); err == nil {
		t.Error("a /28 gave 15 addresses")
	}
	// A /16 holds 65536 - 256 (band) - 1 (broadcast) seedable addresses.
	all, err := SeedClusterIPs(netip.MustParsePrefix("10.96.0.0/16"), 65279, nil)
	if err != nil || all[len(all)-1] != ip("10.96.255.254") {
		t.Errorf("the whole /16: last %v, %v", all[len(all)-1], err)
	}
	if _, err := SeedClusterIPs(netip.MustParsePrefix("10.96.0.0/16"), 65280, nil); err == nil {
		t.Error("a /16 gave the broadcast address")
	}
	if _, err := SeedClusterIPs(netip.MustParsePrefix("::ffff:10.96.0.0/112"), 1, nil); err == nil {
		t.Error("an IPv4-mapped CIDR was used")
	}
}

func TestSeedClusterIPsIPv6(t *testing.T) {
	ip := netip.MustParseAddr
	v6 := netip.MustParsePrefix(DefaultServiceCIDR6)
	taken := map[netip.Addr]bool{ip("fd00:10:96::101"): true, ip("fd00:10:96::1"): true}
	got, err := SeedClusterIPs(v6, 3, taken)
	if want := []netip.Addr{ip("fd00:10:96::100"), ip("fd00:10:96::102"), ip("fd00:10:96::103")}; err != nil || !slices.Equal(got, want) {
		t.Errorf("/112: %v, %v; want %v", got, err, want)
	}
	// A /112 holds 65536 - 256 (band) seedable addresses: IPv6 has no
	// broadcast address, the last one is allocated too.
	all, err := SeedClusterIPs(v6, 65280, nil)
	if err != nil || all[len(all)-1] != ip("fd00:10:96::ffff") {
		t.Errorf("the whole /112: %v", err)
	}
	if _, err := SeedClusterIPs(v6, 65281, nil); err == nil {
		t.Error("a /112 gave 65281 addresses")
	}
	// A /124 (16 addresses) has no static band: ::1 to ::f.
	got, err = SeedClusterIPs(netip.MustParsePrefix("fd00::10/124"), 15, nil)
	if err != nil || got[0] != ip("fd00::11") || got[14] != ip("fd00::1f") {
		t.Errorf("/124: %v, %v", got, err)
	}
	// A /64 is larger than any count: the band is 256.
	got, err = SeedClusterIPs(netip.MustParsePrefix("fd00:1::/64"), 2, nil)
	if err != nil || got[0] != ip("fd00:1::100") || got[1] != ip("fd00:1::101") {
		t.Errorf("/64: %v, %v", got, err)
	}
	// The last prefix of the space ends on the last address.
	got, err = SeedClusterIPs(netip.MustParsePrefix("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124"), 15, nil)
	if err != nil || got[14] != ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff") {
		t.Errorf("the space's last /124: %v, %v", got, err)
	}
}

func TestLastAddr(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.96.0.0/16": "10.96.255.255", "10.0.0.5/28": "10.0.0.15", "10.1.2.3/32": "10.1.2.3",
		"fd00:10:96::/112": "fd00:10:96::ffff", "fd00::/65": "fd00::7fff:ffff:ffff:ffff", "::/0": "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	} {
		if got := lastAddr(netip.MustParsePrefix(cidr)); got != netip.MustParseAddr(want) {
			t.Errorf("lastAddr(%s) = %s, want %s", cidr, got, want)
		}
	}
}

func TestClusterIPBand(t *testing.T) {
	for size, want := range map[uint64]uint64{16: 0, 32: 16, 256: 16, 1024: 64, 1 << 16: 256, 1 << 20: 256} {
		if got := clusterIPBand(size); got != want {
			t.Errorf("clusterIPBand(%d) = %d, want %d", size, got, want)
		}
	}
}

func TestParallel(t *testing.T) {
	var ran atomic.Int64
	if err := Parallel(1000, etcdWriters, func(int) error { ran.Add(1); return nil }); err != nil || ran.Load() != 1000 {
		t.Errorf("ran %d, %v", ran.Load(), err)
	}
	ran.Store(0)
	boom := errors.New("boom")
	err := Parallel(1000, etcdWriters, func(i int) error {
		ran.Add(1)
		if i == 10 {
			return boom
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() > 100 {
		t.Errorf("after an error: ran %d, %v", ran.Load(), err)
	}
	if err := Parallel(0, etcdWriters, func(int) error { return boom }); err != nil {
		t.Error(err)
	}
}

func TestWorkqueueStats(t *testing.T) {
	text := `# HELP workqueue_adds_total [STABLE] Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="ipaddresses"} 240771
workqueue_adds_total{name="services"} 88946
workqueue_depth{name="ipaddresses"} 3
workqueue_depth{name="services"} 0
workqueue_retries_total{name="services"} 3652
`
	adds, depth, err := workqueueStats(text, "ipaddresses")
	if err != nil || adds != 240771 || depth != 3 {
		t.Errorf("ipaddresses: %v %v %v", adds, depth, err)
	}
	if adds, depth, err := workqueueStats(text, "services"); err != nil || adds != 88946 || depth != 0 {
		t.Errorf("services: %v %v %v", adds, depth, err)
	}
	if _, _, err := workqueueStats(text, "servicecidrs"); err == nil {
		t.Error("a missing queue was found")
	}
}

func TestSeedChunk(t *testing.T) {
	build := func(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
		svc, s := goldenShapes()
		svc.Name = fmt.Sprintf("bg-%05d", i)
		return svc, s
	}
	ips := []netip.Addr{netip.MustParseAddr("10.96.1.0"), netip.MustParseAddr("10.96.1.2")}
	addrs, objs, err := seedChunk(10, 12, build, ips)
	if err != nil || len(addrs) != 2 || len(objs) != 4 {
		t.Fatalf("%d addresses, %d objects, %v", len(addrs), len(objs), err)
	}
	addr, svc := addrs[1].(*networkingv1.IPAddress), objs[2].(*corev1.Service)
	if addr.Name != "10.96.1.2" || addr.Spec.ParentRef.Name != "bg-00011" || svc.Name != "bg-00011" || svc.Spec.ClusterIP != "10.96.1.2" {
		t.Errorf("group 1: %s for %s, service %s on %s", addr.Name, addr.Spec.ParentRef.Name, svc.Name, svc.Spec.ClusterIP)
	}
	if s, ok := objs[3].(*discoveryv1.EndpointSlice); !ok || s.Generation != 1 {
		t.Errorf("objects[3]: %T", objs[3])
	}
}
