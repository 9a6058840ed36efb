package reconcile

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
)

// Kinds of repaired state, the kind label's values.
const (
	KindIPTables      = "iptables"
	KindNFTables      = "nftables"
	KindIPSet         = "ipset"
	KindInterface     = "interface"
	KindVirtualServer = "virtual_server"
	KindRealServer    = "real_server"
	KindPolicyRoute   = "policy_route"
)

func newRepairedVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "switchyard", Name: "rules_repaired_total",
		Help: "Syncs that found kernel state of the proxy mode changed or removed outside switchyard and restored it, " +
			"per mode, kind of state (iptables, nftables, ipset, interface, virtual_server, real_server, policy_route) and IP family.",
	}, []string{"mode", "kind", "ip_family"})
}

// Repairs counts one mode's repairs in switchyard_rules_repaired_total.
type Repairs struct {
	vec  *prometheus.CounterVec
	mode string
}

// NewRepairs registers the counter with reg (a counter another mode's
// Repairs registered there is shared) and starts the mode's series at 0
// in each family; with a nil reg the counts are kept but not exported.
func NewRepairs(reg prometheus.Registerer, mode string, families []v1.IPFamily) (*Repairs, error) {
	vec := newRepairedVec()
	if reg != nil {
		if err := reg.Register(vec); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			vec = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	r := &Repairs{vec: vec, mode: mode}
	for _, f := range families {
		r.vec.WithLabelValues(mode, defaultKind(mode), string(f))
	}
	return r, nil
}

// defaultKind is the state every mode of that name keeps: its rules.
func defaultKind(mode string) string {
	if mode == "nftables" {
		return KindNFTables
	}
	return KindIPTables
}

// Record counts one sync that repaired a kind of state in a family.
func (r *Repairs) Record(kind string, fam v1.IPFamily) {
	if r == nil {
		return
	}
	r.vec.WithLabelValues(r.mode, kind, string(fam)).Inc()
}

// Count is what was recorded for the kind and family (tests, tools).
func (r *Repairs) Count(kind string, fam v1.IPFamily) float64 {
	if r == nil {
		return 0
	}
	var m dto.Metric
	_ = r.vec.WithLabelValues(r.mode, kind, string(fam)).Write(&m)
	return m.GetCounter().GetValue()
}
