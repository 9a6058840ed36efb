package conntrack

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

// Table is the kernel conntrack table of one network namespace, as the
// reconciler needs it.
type Table interface {
	// Delete makes one pass over the family's table and deletes every entry
	// filter matches. It returns the number deleted; on error some entries
	// may have been deleted already (the count says how many). A filter
	// that is a Scoped may have the table look at only part of it.
	Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error)
}

// Scoped is a filter that can match only entries the kernel can pick out
// by itself: of one protocol, to one service address. A Table may ask the
// kernel for those entries alone (one dump per element); the filter still
// decides on each entry it gets.
type Scoped interface {
	// Scope returns the kernel filters; nil means the whole table.
	Scope() []ctnetlink.Filter
}

// Counter is a Table that can tell how many entries it holds, without
// a walk.
type Counter interface {
	Count() (int, error)
}

// NetlinkTable is the Table of a network namespace, through netfilter
// netlink sockets opened in that namespace: lanes of one socket that
// dumps and one that deletes, so that the dumps of a Scope run side by
// side, one per CPU (up to maxLanes).
type NetlinkTable struct {
	mu    sync.Mutex // one Delete, List or Count at a time
	lanes []*lane
}

// lane dumps and deletes on sockets of its own.
type lane struct {
	dump, del *ctnetlink.Conn
	r         flowReader
}

// maxLanes bounds the dumps a Delete runs at once: each keeps a CPU busy
// in the kernel's walk of the table.
const maxLanes = 4

var _ Table = (*NetlinkTable)(nil)

// NewNetlinkTable opens the conntrack table of the namespace ns
// (netns.None() for the caller's own). Close it when done.
func NewNetlinkTable(ns netns.NsHandle) (*NetlinkTable, error) {
	t := &NetlinkTable{}
	for range max(1, min(maxLanes, runtime.GOMAXPROCS(0))) {
		dump, err := ctnetlink.Open(ns)
		if err != nil {
			t.Close()
			return nil, err
		}
		del, err := ctnetlink.Open(ns)
		if err != nil {
			dump.Close()
			t.Close()
			return nil, err
		}
		t.lanes = append(t.lanes, &lane{dump: dump, del: del})
	}
	return t, nil
}

// Close releases the netlink sockets.
func (t *NetlinkTable) Close() {
	for _, l := range t.lanes {
		l.dump.Close()
		l.del.Close()
	}
}

// Delete implements Table: one streamed dump per element of the filter's
// Scope (the kernel sends only the entries of that protocol and service
// address, when it supports CTA_FILTER), the dumps spread over the
// lanes, and the matched entries deleted by their own tuples and id, many
// to a sendmsg, while the dump goes on. An entry already gone counts as
// deleted. Filters see the ports of SCTP entries too (dump.go); a Scoped
// filter with several elements is called from several goroutines at
// once.
func (t *NetlinkTable) Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fam := uint8(inetFamily(family))
	scope := kernelFilters(filter)
	lanes := t.lanes[:min(len(t.lanes), len(scope))]
	counts := make([]int, len(lanes))
	errs := make([]error, len(lanes))
	var wg sync.WaitGroup
	for i, l := range lanes {
		wg.Go(func() {
			var mine []ctnetlink.Filter
			for j := i; j < len(scope); j += len(lanes) {
				mine = append(mine, scope[j])
			}
			counts[i], errs[i] = l.delete(fam, mine, filter)
		})
	}
	wg.Wait()
	n := 0
	for _, c := range counts {
		n += c
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("delete %s conntrack entries: %w", family, err)
	}
	return n, nil
}

// delete runs one lane's dumps.
func (l *lane) delete(fam uint8, scope []ctnetlink.Filter, filter netlink.CustomConntrackFilter) (int, error) {
	batch := l.del.NewBatch(fam, ctnetlink.MsgDelete)
	var matched int
	var errs []error
	for _, f := range scope {
		err := l.dump.Dump(fam, f, func(attrs []byte) error {
			if !l.r.read(fam, attrs) || !filter.MatchConntrackFlow(&l.r.f) {
				return nil
			}
			matched++
			return batch.AddRaw(attrs)
		})
		if err != nil {
			// An interrupted dump is still worth acting on: the entries
			// read are real; the next pass retries.
			errs = append(errs, err)
			if !errors.Is(err, ctnetlink.ErrDumpInterrupted) {
				break
			}
		}
	}
	if err := batch.Flush(); err != nil {
		errs = append(errs, err)
	}
	failed, first := batch.Errors(syscall.ENOENT)
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%d deletes failed, first: %w", failed, first))
	}
	return max(0, matched-failed), errors.Join(errs...)
}

// kernelFilters is a filter's Scope: one unfiltered dump without one.
func kernelFilters(filter netlink.CustomConntrackFilter) []ctnetlink.Filter {
	if s, ok := filter.(Scoped); ok && s.Scope() != nil {
		return s.Scope()
	}
	return []ctnetlink.Filter{{}}
}

// Count implements Counter: the kernel's count of the namespace's
// entries (all families).
func (t *NetlinkTable) Count() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lanes[0].dump.Count()
}

// List returns the family's entries of the protocol (0 for all), for
// diagnostics and tests, with ports of SCTP entries too.
func (t *NetlinkTable) List(family v1.IPFamily, proto uint8) ([]*netlink.ConntrackFlow, error) {
	fam := uint8(inetFamily(family))
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*netlink.ConntrackFlow
	l := t.lanes[0]
	err := l.dump.Dump(fam, ctnetlink.Filter{Proto: proto}, func(attrs []byte) error {
		if l.r.read(fam, attrs) && (proto == 0 || l.r.f.Forward.Protocol == proto) {
			out = append(out, cloneFlow(&l.r.f))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s conntrack entries: %w", family, err)
	}
	return out, nil
}

// inetFamily maps an IP family to the netlink address family.
func inetFamily(f v1.IPFamily) netlink.InetFamily {
	if f == v1.IPv6Protocol {
		return netlink.InetFamily(syscall.AF_INET6)
	}
	return netlink.InetFamily(syscall.AF_INET)
}
