package explain

import (
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
)

// SetSaver gives `ipset save` output (ipset.Interface's Save: read only).
type SetSaver interface {
	Save(ctx context.Context) ([]byte, error)
}

// savedSets are the node's ipsets as the iptables tracer looks them up;
// err is why they could not be read.
type savedSets struct {
	sets map[string]*ipset.Set
	err  error
}

var _ iptablestest.IPSets = savedSets{}

func readSets(ctx context.Context, s SetSaver) savedSets {
	if s == nil {
		return savedSets{err: fmt.Errorf("no ipset reader")}
	}
	data, err := s.Save(ctx)
	if err != nil {
		return savedSets{err: err}
	}
	sets, err := ipset.ParseSave(data)
	if err != nil {
		return savedSets{err: fmt.Errorf("reading `ipset save`: %w", err)}
	}
	return savedSets{sets: sets}
}

// MatchSet implements iptablestest.IPSets.
func (s savedSets) MatchSet(name string, dirs []string, p iptablestest.SetPacket) (bool, error) {
	if s.err != nil {
		return false, fmt.Errorf("the node's ipsets could not be read: %w", s.err)
	}
	set, ok := s.sets[name]
	if !ok {
		return false, fmt.Errorf("no set of that name in `ipset save`")
	}
	return set.Match(dirs, ipset.Packet{Src: p.Src, Dst: p.Dst, Proto: p.Protocol, SrcPort: p.SrcPort, DstPort: p.DstPort})
}
