package nftables_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestKernelPartialSyncChurn replays TestPartialSyncChurn's kind of churn
// into a real kernel and into the fake side by side, and compares the
// elements of every set and map the kernel holds (as nft lists them)
// with the fake's after each step: the fake's interval-map semantics are
// what the churn test trusts, so the kernel must agree with them under
// the same delete-then-add transactions.
func TestKernelPartialSyncChurn(t *testing.T) {
	kernelChurn(t, "nftchurn", rand.New(rand.NewPCG(3, 4)), 120, 0)
}

// kernelChurn replays steps of churn into a kernel namespace and into the
// fake side by side, both daemons replaced by new ones (a restart's full
// sync) every restartEvery steps when that is not zero, and compares the
// kernel's elements and counts with the fake's after each step.
func kernelChurn(t *testing.T, name string, r *rand.Rand, steps, restartEvery int) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, name)
	_, node := flowtest.Fixture()
	svcs, nextIP := churnServices(12)
	fake := nftablestest.NewFake()
	fb, kb := flowBackend(t, fake, node), kernelBackend(t, node)
	st := emptyChurnState()
	mustSync(t, fb, st, fullDiff())
	kernelSync(t, ns, kb, st, fullDiff())
	for step := range steps {
		s, what, next, diff := churnStep(r, svcs, nextIP, st)
		if restartEvery > 0 && step%restartEvery == 0 {
			fb, kb, diff = flowBackend(t, fake, node), kernelBackend(t, node), fullDiff()
		}
		mustSync(t, fb, next, diff)
		kernelSync(t, ns, kb, next, diff)
		st = next
		out := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "list", "table", "ip", nftables.TableName)
		if d := cmp.Diff(nftElements(fake.Dump(ruleset.IPv4, nftables.TableName)), nftElements(out)); d != "" {
			t.Fatalf("step %d (%s: %s): kernel elements differ from the fake's (-fake +kernel):\n%s", step, s.name, what, d)
		}
		checkKernelCounts(t, ns, fake)
	}
}

var nftSetHeader = regexp.MustCompile(`^\s*(set|map) (\S+) \{`)

// nftElements reads the elements of each set and map out of nft's
// listing syntax (nft list table, and the fake's Dump), sorted.
func nftElements(text string) map[string][]string {
	out := map[string][]string{}
	var cur string
	var inElems bool
	var buf strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if m := nftSetHeader.FindStringSubmatch(line); m != nil {
			cur, inElems = m[2], false
			out[cur] = nil
			continue
		}
		if cur == "" {
			continue
		}
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "elements = {") {
			inElems = true
			buf.Reset()
			trim = strings.TrimPrefix(trim, "elements = {")
		}
		if !inElems {
			continue
		}
		buf.WriteString(" " + trim)
		if strings.HasSuffix(trim, "}") {
			body := strings.TrimSuffix(strings.TrimSpace(buf.String()), "}")
			for _, e := range strings.Split(body, ",") {
				if e = strings.Join(strings.Fields(e), " "); e != "" {
					out[cur] = append(out[cur], decimalRange(e))
				}
			}
			slices.Sort(out[cur])
			cur, inElems = "", false
		}
	}
	return out
}

// decimalRange writes an interval key nft printed in hex ("0x00050000/17",
// "0x00030000-0x00035554": the typeof numgen key is 16 bits wide to nft,
// the offsets are not) as the fake does ("327680-360447").
func decimalRange(e string) string {
	key, rest, ok := strings.Cut(e, " : ")
	if !ok || !strings.HasPrefix(key, "0x") {
		return e
	}
	var lo, hi uint64
	if a, b, ok := strings.Cut(key, "-"); ok {
		lo, _ = strconv.ParseUint(a, 0, 32)
		hi, _ = strconv.ParseUint(b, 0, 32)
	} else if a, bits, ok := strings.Cut(key, "/"); ok {
		lo, _ = strconv.ParseUint(a, 0, 32)
		n, _ := strconv.Atoi(bits)
		hi = lo + (uint64(1) << (32 - n)) - 1
	} else {
		lo, _ = strconv.ParseUint(key, 0, 32)
		hi = lo
	}
	return fmt.Sprintf("%d-%d : %s", lo, hi, rest)
}

func emptyChurnState() *proxier.State {
	return &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}, Node: churnNode()}
}

func churnDiff() *proxier.Diff {
	return &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}, Deleted: map[proxier.ServicePortName]*proxier.ServicePort{}}
}
