package framework

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The work queues of kube-apiserver's ClusterIP repair loop; their
// workqueue_adds_total and workqueue_depth tell what its informers (shared
// with its ClusterIP allocator) have seen and what it has still to do.
const (
	repairServiceQueue = "services"
	repairIPQueue      = "ipaddresses"
)

// DefaultSeedChunk is how many Services a ServiceSeeder writes between two
// waits for the apiserver.
const DefaultSeedChunk = 2000

// seedPaceTimeout bounds one wait for the repair loop.
const seedPaceTimeout = 2 * time.Minute

// seedStall is how long the repair loop's queue may stay empty, its adds
// unchanged, before a paced write stops waiting for the adds it expected.
const seedStall = 10 * time.Second

// ServiceSeeder writes ClusterIP Services and their EndpointSlices straight
// into a kube-apiserver's etcd, and deletes them there, paced so that the
// apiserver's own informers keep up: a chunk's IPAddresses, then a wait
// until its ClusterIP repair loop has seen them all, then the chunk's
// Services and slices, and a wait again.
//
// The repair loop acts on what its informers show: it deletes as leaked an
// IPAddress whose Service it has not seen 60 s after the IPAddress's
// creation, and recreates the IPAddress of a Service it sees without one
// (also of a Service deleted from etcd that it still sees). 44k Services
// written at once on 2 cores (and 64 objects a revision, see Etcd.Create)
// left its informers minutes behind, the watch cache closing their watches
// as unresponsive again and again, and it did all of that by the thousand.
type ServiceSeeder struct {
	Etcd   *Etcd
	Client kubernetes.Interface // admin: lists and the apiserver's /metrics
	Chunk  int                  // Services per chunk; DefaultSeedChunk if 0
	// Family is the seeded Services' one family (their ClusterIP comes
	// from the service CIDR of that family); IPv4 if empty.
	Family corev1.IPFamily
	// Waited adds up the time spent waiting for the repair loop.
	Waited time.Duration
	// Stalls counts the waits that ended with the repair loop idle before
	// it had counted every key written (see seedStall).
	Stalls int
}

// BuildFunc returns the i-th Service to seed (ClusterIP, without an
// address: the seeder picks one) and its EndpointSlice.
type BuildFunc func(i int) (*corev1.Service, *discoveryv1.EndpointSlice)

// Seed writes Services 0..n-1 from build, each on a ClusterIP of the
// seeder's family the apiserver has not allocated, with the IPAddress its
// allocator would have made.
func (s *ServiceSeeder) Seed(ctx context.Context, n int, build BuildFunc) error {
	cidr, err := ServiceCIDR(ctx, s.Client, orDefault(s.Family, corev1.IPv4Protocol))
	if err != nil {
		return err
	}
	taken, err := TakenClusterIPs(ctx, s.Client)
	if err != nil {
		return err
	}
	ips, err := SeedClusterIPs(cidr, n, taken)
	if err != nil {
		return err
	}
	for lo := 0; lo < n; lo += s.chunk() {
		hi := min(n, lo+s.chunk())
		addrs, objs, err := seedChunk(lo, hi, build, ips[lo:hi])
		if err != nil {
			return err
		}
		if err := s.paced(ctx, repairIPQueue, hi-lo, func() error { return s.Etcd.Create(ctx, addrs) }); err != nil {
			return fmt.Errorf("IPAddresses of services %d-%d: %w", lo, hi-1, err)
		}
		if err := s.paced(ctx, repairServiceQueue, hi-lo, func() error { return s.Etcd.Create(ctx, objs) }); err != nil {
			return fmt.Errorf("services %d-%d: %w", lo, hi-1, err)
		}
	}
	return nil
}

func (s *ServiceSeeder) chunk() int {
	if s.Chunk > 0 {
		return s.Chunk
	}
	return DefaultSeedChunk
}

// seedChunk builds Services lo..hi-1 on ips as stored now: their
// IPAddresses, and the Services with their slices. They are stamped when
// written: the repair loop counts an IPAddress's 60 s of grace from its
// creation.
func seedChunk(lo, hi int, build BuildFunc, ips []netip.Addr) (addrs, objs []runtime.Object, err error) {
	now := time.Now()
	for i := lo; i < hi; i++ {
		svc, slice := build(i)
		seeded, addr, err := SeedService(svc, ips[i-lo], now)
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, addr)
		objs = append(objs, seeded, SeedEndpointSlice(slice, now))
	}
	return addrs, objs, nil
}

// DeleteNamespace deletes ns's EndpointSlices, then its Services a chunk at
// a time, each chunk's IPAddresses once the repair loop has seen its
// Services go (it recreates the IPAddress of a Service it still sees), and
// returns how many keys went.
func (s *ServiceSeeder) DeleteNamespace(ctx context.Context, ns string) (int, error) {
	slices, err := s.Etcd.Keys(ctx, sliceKeyPrefix(ns))
	if err != nil {
		return 0, err
	}
	if err := s.Etcd.Delete(ctx, slices); err != nil {
		return 0, err
	}
	svcs, err := s.Etcd.Keys(ctx, serviceKeyPrefix(ns))
	if err != nil {
		return len(slices), err
	}
	ips, err := s.Etcd.serviceIPAddressKeys(ctx, ns)
	if err != nil {
		return len(slices), err
	}
	deleted := len(slices)
	for lo := 0; lo < len(svcs); lo += s.chunk() {
		chunk := svcs[lo:min(len(svcs), lo+s.chunk())]
		n, err := s.deleteServices(ctx, ns, chunk, ips)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	var rest []string // IPAddresses of Services that were not there
	for _, keys := range ips {
		rest = append(rest, keys...)
	}
	return deleted + len(rest), s.Etcd.Delete(ctx, rest)
}

// deleteServices deletes the Services of keys, waits for the repair loop,
// then deletes their IPAddresses (and drops them from ips).
func (s *ServiceSeeder) deleteServices(ctx context.Context, ns string, keys []string, ips map[string][]string) (int, error) {
	if err := s.paced(ctx, repairServiceQueue, len(keys), func() error { return s.Etcd.Delete(ctx, keys) }); err != nil {
		return 0, err
	}
	var addrs []string
	for _, k := range keys {
		name := strings.TrimPrefix(k, serviceKeyPrefix(ns))
		addrs = append(addrs, ips[name]...)
		delete(ips, name)
	}
	err := s.paced(ctx, repairIPQueue, len(addrs), func() error { return s.Etcd.Delete(ctx, addrs) })
	return len(keys) + len(addrs), err
}

// paced runs write, which adds or deletes n objects the repair loop's
// queue handles, then waits until the queue has had n more keys and has
// none left to do. (A periodic resync of the repair loop's informers may
// end one wait early; the next one starts from the count it finds.)
func (s *ServiceSeeder) paced(ctx context.Context, queue string, n int, write func() error) error {
	before, _, err := s.repairQueue(ctx, queue)
	if err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	start := time.Now()
	defer func() { s.Waited += time.Since(start) }()
	// A failed scrape (a busy apiserver) is retried until the timeout;
	// the figures reported are the last ones read.
	adds, depth, last := before, 0.0, error(nil)
	moved := time.Now() // when adds last changed
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, seedPaceTimeout, true, func(ctx context.Context) (bool, error) {
		a, d, err := s.repairQueue(ctx, queue)
		if err != nil {
			last = err
			return false, nil
		}
		if a != adds {
			moved = time.Now()
		}
		adds, depth = a, d
		if depth == 0 && adds < before+float64(n) && time.Since(moved) > seedStall {
			// Idle, with fewer keys than written: its informers saw the
			// writes some other way (a relist coalesces them). Nothing is
			// left for it to do.
			s.Stalls++
			return true, nil
		}
		return adds >= before+float64(n) && depth == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the apiserver's ClusterIP repair loop: queue %s has had %.0f of %d adds, %.0f to do (last scrape error: %v): %w",
			queue, adds-before, n, depth, last, err)
	}
	return nil
}

// repairQueue scrapes the apiserver for a repair loop queue's adds so far
// and depth.
func (s *ServiceSeeder) repairQueue(ctx context.Context, queue string) (adds, depth float64, err error) {
	body, err := s.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("apiserver metrics: %w", err)
	}
	return workqueueStats(string(body), queue)
}

// workqueueStats finds workqueue_adds_total and workqueue_depth of queue
// name in Prometheus text (a plain scan: the apiserver's is megabytes).
func workqueueStats(text, name string) (adds, depth float64, err error) {
	want := map[string]*float64{
		`workqueue_adds_total{name="` + name + `"}`: &adds,
		`workqueue_depth{name="` + name + `"}`:      &depth,
	}
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && found < len(want) {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if dst := want[series]; ok && dst != nil {
			if *dst, err = strconv.ParseFloat(value, 64); err != nil {
				return 0, 0, fmt.Errorf("%s: %w", series, err)
			}
			found++
		}
	}
	if found < len(want) {
		return 0, 0, fmt.Errorf("no workqueue_adds_total and workqueue_depth for queue %q in the apiserver's metrics", name)
	}
	return adds, depth, sc.Err()
}
