//go:build e2e

package e2e

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Set to N: after the changes, N EndpointSlice updates of distinct
// background services, spread evenly over 10 s (the burst: 1,000).
const scaleBurstEnv = "SWITCHYARD_SCALE_BURST"

const burstSpan = 10 * time.Second

// burstResult is what a burst cost one proxy.
type burstResult struct {
	updates   int
	latencies []time.Duration // update write -> end of the sync that carried it
	syncs     int
	cpuShare  float64 // of one core, from the first write to the last sync
}

// scaleBurst writes the burst through four writers paced by a ticker;
// each update replaces endpoint 0 of a service not touched before.
func scaleBurst(t *testing.T, cs kubernetes.Interface, env *framework.Env, d *framework.Daemon, first, n, gen int) burstResult {
	api := cs.DiscoveryV1().EndpointSlices(env.Namespace)
	objs := make([]*discoveryv1.EndpointSlice, n)
	for k := range objs {
		s, err := api.Get(t.Context(), backgroundSliceName(first+k, corev1.IPv4Protocol), metav1.GetOptions{})
		if err != nil {
			t.Errorf("burst: %v", err)
			return burstResult{}
		}
		s.Endpoints[0].Addresses = []string{backgroundAddr(corev1.IPv4Protocol, 252, gen, k)}
		objs[k] = s
	}
	logFrom := d.LogSize()
	cpu0, _ := framework.ProcCPU(d.PID())
	begin := time.Now()
	writes := runBurstWrites(t, api, objs)
	res := burstResult{updates: n}
	if os.Getenv(scaleTraceEnv) == "1" && strings.HasPrefix(d.Name, "switchyard") {
		res.latencies, res.syncs = burstLatencies(t, d, logFrom, writes)
	} else {
		time.Sleep(2 * time.Second) // let the last sync end
	}
	end := time.Now()
	if cpu1, err := framework.ProcCPU(d.PID()); err == nil {
		res.cpuShare = float64(cpu1-cpu0) / float64(end.Sub(begin))
	}
	return res
}

// burstWrite is one update: when it began and when the apiserver answered.
type burstWrite struct{ start, done time.Time }

func runBurstWrites(t *testing.T, api discoveryclient.EndpointSliceInterface, objs []*discoveryv1.EndpointSlice) []burstWrite {
	jobs := make(chan int)
	writes := make([]burstWrite, len(objs))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for k := range jobs {
				writes[k].start = time.Now()
				if _, err := api.Update(t.Context(), objs[k], metav1.UpdateOptions{}); err != nil {
					t.Errorf("burst update %d: %v", k, err)
				}
				writes[k].done = time.Now()
			}
		})
	}
	begin := time.Now()
	for k := range objs {
		time.Sleep(time.Until(begin.Add(burstSpan * time.Duration(k) / time.Duration(len(objs)))))
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	return writes
}

var traceChanged = regexp.MustCompile(`changed=(\d+)`)

var klogTime = regexp.MustCompile(`^\s*I(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})`)

// burstLatencies waits for the syncs that carried the burst and gives each
// update's latency. The updates reach the daemon in the order the
// apiserver answered them, each changes one service port, and nothing else
// changes meanwhile: so the syncs after the burst began carry them in that
// order, as many each as its trace's "changed".
func burstLatencies(t *testing.T, d *framework.Daemon, logFrom int64, writes []burstWrite) ([]time.Duration, int) {
	order := make([]int, len(writes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return writes[a].done.Compare(writes[b].done) })
	var ends []time.Time
	var carried []int
	deadline := time.Now().Add(30 * time.Second)
	for sum(carried) < len(writes) && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		log, err := d.LogFrom(logFrom)
		if err != nil {
			t.Errorf("burst: %v", err)
			return nil, 0
		}
		ends, carried = traceEnds(log, writes[order[0]].start)
	}
	var out []time.Duration
	next := 0
	for i, n := range carried {
		for ; n > 0 && next < len(order); n-- {
			out = append(out, ends[i].Sub(writes[order[next]].start))
			next++
		}
	}
	if next < len(order) {
		t.Errorf("burst: the syncs after it carried %d of %d updates", next, len(order))
	}
	return out, len(carried)
}

// traceEnds gives, for each sync trace of the log, its line's time (the
// sync's end) and how many service ports it changed.
func traceEnds(log string, day time.Time) ([]time.Time, []int) {
	var ends []time.Time
	var changed []int
	for _, line := range strings.Split(log, "\n") {
		m := klogTime.FindStringSubmatch(line)
		if m == nil || !strings.Contains(line, `"Sync trace"`) {
			continue
		}
		c := traceChanged.FindStringSubmatch(line)
		if c == nil {
			continue
		}
		n, _ := strconv.Atoi(c[1])
		if n == 0 {
			continue
		}
		v := make([]int, 6)
		for i := range v {
			v[i], _ = strconv.Atoi(m[i+1])
		}
		ends = append(ends, time.Date(day.Year(), time.Month(v[0]), v[1], v[2], v[3], v[4], v[5]*1000, time.Local))
		changed = append(changed, n)
	}
	return ends, changed
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
