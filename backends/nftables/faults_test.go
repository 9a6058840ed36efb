package nftables_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestPeriodicSyncRepairsTampering: someone deletes the table, flushes a
// chain or deletes a map element; the next periodic sync (Diff.Verify),
// or a partial sync once the verify interval has passed, notices,
// rewrites and counts the repair; a periodic sync with nothing touched
// writes nothing.
func TestPeriodicSyncRepairsTampering(t *testing.T) {
	tamper := map[string]func(*nftablestest.Fake){
		"table deleted": func(f *nftablestest.Fake) { f.DeleteTable(ruleset.IPv4, nftables.TableName) },
		"chain flushed": func(f *nftablestest.Fake) {
			f.Tamper(ruleset.IPv4, nftables.TableName, func(tb *ruleset.Table) { tb.Chains["services"].Rules = nil })
		},
		"element deleted": func(f *nftablestest.Fake) {
			f.Tamper(ruleset.IPv4, nftables.TableName, func(tb *ruleset.Table) {
				for k := range tb.Sets["endpoints-0"].Elements {
					delete(tb.Sets["endpoints-0"].Elements, k)
					return
				}
			})
		},
	}
	const interval = time.Minute
	for name, fn := range tamper {
		for _, periodic := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/periodic=%v", name, periodic), func(t *testing.T) {
				state, node := flowtest.Fixture()
				fake := nftablestest.NewFake()
				reg := prometheus.NewRegistry()
				clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
				b, err := nftables.New(nftables.Config{Families: node.Families, LocalDetector: node.LocalDetector,
					MasqueradeAll: node.MasqueradeAll, Conn: fake, Registerer: reg, Clock: clk, VerifyInterval: interval})
				if err != nil {
					t.Fatal(err)
				}
				mustSync(t, b, state, fullDiff())
				want := fake.Dump(ruleset.IPv4, nftables.TableName)
				before := len(fake.Transactions)
				mustSync(t, b, state, &proxier.Diff{Verify: true})
				if len(fake.Transactions) != before {
					t.Fatalf("a periodic sync of an untouched table wrote %d transactions", len(fake.Transactions)-before)
				}
				fn(fake)
				diff := &proxier.Diff{Verify: true}
				if !periodic {
					diff = &proxier.Diff{}
					if res := mustSync(t, b, state, diff); res.Full {
						t.Fatal("a partial sync within the interval checked the table")
					}
					clk.SetTime(clk.Now().Add(interval))
				}
				if res := mustSync(t, b, state, diff); !res.Full {
					t.Errorf("sync after tampering was not full")
				}
				if got := fake.Dump(ruleset.IPv4, nftables.TableName); got != want {
					t.Errorf("table not repaired:\n%s", got)
				}
				if v := repairedCount(t, reg); v != 1 {
					t.Errorf("switchyard_rules_repaired_total{mode=nftables,kind=nftables,ip_family=IPv4} = %v, want 1", v)
				}
			})
		}
	}
}

// repairedCount is the nftables mode's IPv4 series of
// switchyard_rules_repaired_total.
func repairedCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_rules_repaired_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["mode"] == "nftables" && l["kind"] == "nftables" && l["ip_family"] == "IPv4" {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatal("no switchyard_rules_repaired_total series for nftables IPv4")
	return 0
}

// TestRejectedTransaction: the kernel rejects a transaction; the error
// names it, the failure is counted, nothing was half-applied and the next
// sync is full and succeeds.
func TestRejectedTransaction(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	reg := prometheus.NewRegistry()
	b, err := nftables.New(nftables.Config{Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: node.LocalDetector, Conn: fake, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, b, state, fullDiff())
	want := fake.Dump(ruleset.IPv4, nftables.TableName)
	changed := cloneState(state)
	some := sortedPorts(state)[0]
	changed.Endpoints[some] = nil
	fake.FailNext = errors.New("netlink receive: invalid argument")
	_, err = syncTracked(b, changed, changedDiff(some))
	if err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Fatalf("sync error = %v, want the kernel's", err)
	}
	if got := fake.Dump(ruleset.IPv4, nftables.TableName); got != want {
		t.Errorf("a rejected transaction changed the table")
	}
	if v := counterValue(t, reg, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"); v != 1 {
		t.Errorf("kubeproxy_sync_proxy_rules_nftables_sync_failures_total = %v, want 1", v)
	}
	if res := mustSync(t, b, changed, changedDiff(some)); !res.Full {
		t.Errorf("the sync after a failure was not full")
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
