package framework

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

// openConntrack opens a conntrack netlink socket in the named namespace.
func openConntrack(ns string) (*ctnetlink.Conn, error) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer h.Close()
	return ctnetlink.Open(h)
}

// FillConntrack creates every entry of the mix in the namespace's table,
// many per sendmsg, expiring after timeout. It returns how many the
// kernel refused (by errno).
func FillConntrack(ns string, m *CTMix, timeout time.Duration) (map[string]int, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c, err := openConntrack(ns)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b := c.NewBatch(m.af(), ctnetlink.MsgNew)
	secs := uint32(timeout / time.Second)
	for i := range m.Entries {
		o, r := m.Entry(i)
		if err := b.Add(func(buf []byte) []byte { return ctnetlink.AppendNew(buf, o, r, secs) }); err != nil {
			return nil, err
		}
	}
	if err := b.Flush(); err != nil {
		return nil, err
	}
	failed := map[string]int{}
	for errno, n := range b.Failed {
		failed[errno.Error()] = n
	}
	return failed, nil
}

// af is the mix's netlink address family.
func (m *CTMix) af() uint8 {
	if m.is6() {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

// CTBits is a set of mix entries.
type CTBits []uint64

// NewCTBits returns an empty set for n entries.
func NewCTBits(n int) CTBits { return make(CTBits, (n+63)/64) }

// Set adds i.
func (b CTBits) Set(i int) { b[i/64] |= 1 << (i % 64) }

// Has tells whether i is in the set.
func (b CTBits) Has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// ScanConntrack streams the entries of the mix's family in the namespace's
// table, narrowed by f in the kernel (for IPv6 by protocol and ports
// alone: see ctnetlink.Filter), and returns the mix entries present and how many entries were
// not of the mix.
func ScanConntrack(ns string, m *CTMix, f ctnetlink.Filter) (CTBits, int, error) {
	if err := m.Validate(); err != nil {
		return nil, 0, err
	}
	c, err := openConntrack(ns)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	present := NewCTBits(m.Entries)
	foreign := 0
	err = c.Dump(m.af(), f, func(attrs []byte) error {
		o, r, err := ctnetlink.ParseTuples(attrs)
		if err != nil {
			return err
		}
		if i := m.Index(o, r); i >= 0 {
			present.Set(i)
		} else {
			foreign++
		}
		return nil
	})
	return present, foreign, err
}

// CTWatch records the entries destroyed in a namespace: every mix entry
// with the time its event was read, and how many others.
type CTWatch struct {
	m    *CTMix
	c    *ctnetlink.Conn
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	events  []CTDestroyed
	foreign int
	err     error
}

// CTDestroyed is one destroyed mix entry.
type CTDestroyed struct {
	Index int
	At    time.Time
}

// WatchConntrack subscribes to the namespace's destroy events. Start it
// before the entries are created (only entries created while a listener
// exists carry events, with nf_conntrack_events at its default 2).
func WatchConntrack(ns string, m *CTMix) (*CTWatch, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c, err := openConntrack(ns)
	if err != nil {
		return nil, err
	}
	if err := c.SetReceiveBuffer(256 << 20); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Subscribe(ctnetlink.GroupDestroy); err != nil {
		c.Close()
		return nil, err
	}
	w := &CTWatch{m: m, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, nil
}

func (w *CTWatch) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		err := w.c.ReadEvents(100*time.Millisecond, func(op uint16, attrs []byte) {
			if op != ctnetlink.MsgDelete {
				return
			}
			at := time.Now()
			o, r, err := ctnetlink.ParseTuples(attrs)
			i := -1
			if err == nil {
				i = w.m.Index(o, r)
			}
			w.mu.Lock()
			if i >= 0 {
				w.events = append(w.events, CTDestroyed{Index: i, At: at})
			} else {
				w.foreign++
			}
			w.mu.Unlock()
		})
		if err != nil {
			w.mu.Lock()
			w.err = errors.Join(w.err, err)
			w.mu.Unlock()
			if !errors.Is(err, ctnetlink.ErrEventsLost) {
				return
			}
		}
	}
}

// Events returns the mix entries destroyed so far, how many other
// entries were, and the watch's error (ctnetlink.ErrEventsLost when
// events were dropped).
func (w *CTWatch) Events() ([]CTDestroyed, int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]CTDestroyed(nil), w.events...), w.foreign, w.err
}

// Reset forgets the events so far.
func (w *CTWatch) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events, w.foreign = nil, 0
}

// Close stops the watch.
func (w *CTWatch) Close() {
	close(w.stop)
	<-w.done
	w.c.Close()
}
