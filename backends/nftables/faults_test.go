package nftables_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	nfttest "github.com/switchyard-proxy/switchyard/backends/nftables/testing"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestPeriodicSyncRepairsTampering: someone deletes the table, flushes a
// chain or deletes a map element; the next periodic sync (Diff.Verify)
// notices and rewrites, and a periodic sync with nothing touched writes
// nothing.
func TestPeriodicSyncRepairsTampering(t *testing.T) {
	tamper := map[string]func(*nfttest.Fake){
		"table deleted": func(f *nfttest.Fake) { f.DeleteTable(ruleset.IPv4, nftables.TableName) },
		"chain flushed": func(f *nfttest.Fake) {
			f.Tamper(ruleset.IPv4, nftables.TableName, func(tb *ruleset.Table) { tb.Chains["services"].Rules = nil })
		},
		"element deleted": func(f *nfttest.Fake) {
			f.Tamper(ruleset.IPv4, nftables.TableName, func(tb *ruleset.Table) {
				for k := range tb.Sets["endpoints-0"].Elements {
					delete(tb.Sets["endpoints-0"].Elements, k)
					return
				}
			})
		},
	}
	for name, fn := range tamper {
		t.Run(name, func(t *testing.T) {
			state, node := flowtest.Fixture()
			fake := nfttest.NewFake()
			b := flowBackend(t, fake, node)
			mustSync(t, b, state, fullDiff())
			want := fake.Dump(ruleset.IPv4, nftables.TableName)
			before := len(fake.Transactions)
			mustSync(t, b, state, &proxier.Diff{Verify: true})
			if len(fake.Transactions) != before {
				t.Fatalf("a periodic sync of an untouched table wrote %d transactions", len(fake.Transactions)-before)
			}
			fn(fake)
			if res := mustSync(t, b, state, &proxier.Diff{Verify: true}); !res.Full {
				t.Errorf("periodic sync after tampering was not full")
			}
			if got := fake.Dump(ruleset.IPv4, nftables.TableName); got != want {
				t.Errorf("table not repaired:\n%s", got)
			}
		})
	}
}

// TestRejectedTransaction: the kernel rejects a transaction; the error
// names it, the failure is counted, nothing was half-applied and the next
// sync is full and succeeds.
func TestRejectedTransaction(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nfttest.NewFake()
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
