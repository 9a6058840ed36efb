package runner

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// countServicesEnv sets how many services TestKernelCountRules also loads
// to time CountRules at scale (10 endpoints each; 0 or unset: skip).
const countServicesEnv = "SWITCHYARD_COUNT_SERVICES"

// countPayload adds, on top of kernelPayload, an empty chain, a jump from
// a built-in chain, a goto and a user RETURN rule (the legacy walk must
// tell it from the chain's closing RETURN entry).
const countPayload = `*nat
:SY-TEST-EMPTY - [0:0]
:SY-TEST-RET - [0:0]
-A SY-TEST-RET -p udp -j RETURN
-A SY-TEST-RET -j SY-TEST-SEP
-A OUTPUT -m comment --comment "sy test" -j SY-TEST-SVC
-A OUTPUT -p udp -g SY-TEST-RET
-A POSTROUTING -p tcp -j ACCEPT
COMMIT
`

// TestKernelCountRules: on both iptables modes and both families,
// CountRules agrees with iptables-save on every chain's rule count and
// on where the built-in chains jump.
func TestKernelCountRules(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{ModeNFT, ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "sy-count-"+mode[:3])
			r, err := New(Options{Mode: mode, Netns: ns})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx := context.Background()
			for _, fam := range []Family{IPv4, IPv6} {
				payload := countPayload
				if fam == IPv4 {
					payload = kernelPayload + countPayload
				} else {
					payload = strings.ReplaceAll(strings.ReplaceAll(kernelPayload, "10.96.0.1/32", "fd00::1/128"),
						"10.244.1.2:8080", "[fd00::2]:8080") + countPayload
					payload = strings.ReplaceAll(payload, `-A SY-TEST-FILTER -m comment --comment "ns1/svc1:p80 has no endpoints" -d 10.96.0.9/32`, "-A SY-TEST-FILTER -d fd00::9/128")
				}
				if err := r.Restore(ctx, fam, []byte(payload)); err != nil {
					t.Fatalf("%s: Restore: %v (lines %q)", fam, err, OffendingLines([]byte(payload), err))
				}
				for _, table := range []string{"nat", "filter", "mangle"} {
					checkCounts(t, r, fam, table)
				}
			}
			if n, _ := strconv.Atoi(os.Getenv(countServicesEnv)); n > 0 {
				timeCountRules(t, r, n)
			}
		})
	}
}

// checkCounts compares CountRules with iptables-save.
func checkCounts(t *testing.T, r *Runner, fam Family, table string) {
	t.Helper()
	ctx := context.Background()
	got, err := r.CountRules(ctx, fam, table)
	if err != nil {
		t.Fatalf("%s %s: CountRules: %v", fam, table, err)
	}
	saved, err := r.SaveTable(ctx, fam, table)
	if err != nil {
		t.Fatalf("%s %s: SaveTable: %v", fam, table, err)
	}
	want := &TableCounts{Rules: map[string]int{}, Jumps: map[string][]string{}}
	for _, line := range strings.Split(string(saved), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, ":"):
			want.Rules[f[0][1:]] += 0
		case strings.HasPrefix(line, "-A "):
			want.Rules[f[1]]++
			if IsBuiltinChain(f[1]) && len(f) >= 2 && (f[len(f)-2] == "-j" || f[len(f)-2] == "-g") &&
				strings.HasPrefix(f[len(f)-1], "SY-") {
				want.Jumps[f[1]] = append(want.Jumps[f[1]], f[len(f)-1])
			}
		}
	}
	for name, n := range want.Rules {
		if _, ok := got.Rules[name]; !ok && n == 0 && IsBuiltinChain(name) {
			// iptables-nft creates built-in chains when first used;
			// iptables-nft-save prints them anyway.
			delete(want.Rules, name)
		}
	}
	if !maps.Equal(got.Rules, want.Rules) {
		t.Errorf("%s %s: rule counts\n got %v\nwant %v", fam, table, got.Rules, want.Rules)
	}
	if fmt.Sprint(got.Jumps) != fmt.Sprint(want.Jumps) {
		t.Errorf("%s %s: jumps from built-in chains\n got %v\nwant %v", fam, table, got.Jumps, want.Jumps)
	}
	if r.mode == ModeNFT {
		checkUses(t, r, fam, table, got)
	}
}

// checkUses: ChainUses gives each chain its rules plus the jumps to it,
// and CountChainRules counts the chains named (absent ones left out).
func checkUses(t *testing.T, r *Runner, fam Family, table string, counts *TableCounts) {
	t.Helper()
	ctx := context.Background()
	all, err := r.ChainUses(ctx, fam)
	if err != nil {
		t.Fatalf("%s: ChainUses: %v", fam, err)
	}
	uses := all[table]
	if uses == nil {
		uses = map[string]int{}
	}
	if !maps.Equal(uses, counts.Uses) {
		t.Errorf("%s %s: ChainUses %v, CountRules' %v", fam, table, uses, counts.Uses)
	}
	if table == "nat" {
		// SY-TEST-SEP: 1 rule, 3 jumps; SY-TEST-SVC: 2 rules, 2 jumps.
		if uses["SY-TEST-SEP"] != 4 || uses["SY-TEST-SVC"] != 4 || uses["SY-TEST-EMPTY"] != 0 {
			t.Errorf("%s nat: use counts %v; want SY-TEST-SEP 4, SY-TEST-SVC 4, SY-TEST-EMPTY 0", fam, uses)
		}
	}
	names := append(slices.Collect(maps.Keys(counts.Rules)), "SY-NO-SUCH-CHAIN")
	some, err := r.CountChainRules(ctx, fam, table, names)
	if err != nil {
		t.Fatalf("%s %s: CountChainRules: %v", fam, table, err)
	}
	if n, ok := some.Rules["SY-NO-SUCH-CHAIN"]; ok && n != 0 {
		t.Errorf("%s %s: a missing chain counts %d rules", fam, table, n)
	}
	delete(some.Rules, "SY-NO-SUCH-CHAIN")
	if !maps.Equal(some.Rules, counts.Rules) {
		t.Errorf("%s %s: CountChainRules %v, CountRules %v", fam, table, some.Rules, counts.Rules)
	}
}

// timeCountRules loads n services x 10 endpoints shaped like
// kube-proxy's and times CountRules of nat against iptables-save.
func timeCountRules(t *testing.T, r *Runner, n int) {
	ctx := context.Background()
	// Chunks of 128 services (~4,000 lines) declaring whole chains: one
	// --noflush transaction of everything takes minutes on iptables-nft.
	// Legacy rewrites the table at each commit: one transaction.
	chunk := 128
	if r.mode == ModeLegacy {
		chunk = n
	}
	start := time.Now()
	for first := 0; first < n; first += chunk {
		var b strings.Builder
		b.WriteString("*nat\n")
		for s := first; s < min(n, first+chunk); s++ {
			fmt.Fprintf(&b, ":SY-SVC-%d - [0:0]\n", s)
			for e := range 10 {
				fmt.Fprintf(&b, ":SY-SEP-%d-%d - [0:0]\n", s, e)
			}
		}
		for s := first; s < min(n, first+chunk); s++ {
			for e := range 10 {
				sep := fmt.Sprintf("SY-SEP-%d-%d", s, e)
				fmt.Fprintf(&b, "-A %s -s 10.244.%d.%d/32 -m comment --comment \"ns/svc%d:p\" -j MARK --or-mark 0x4000\n", sep, s/250, e, s)
				fmt.Fprintf(&b, "-A %s -p tcp -m comment --comment \"ns/svc%d:p\" -m tcp -j DNAT --to-destination 10.244.%d.%d:8080\n", sep, s, s/250, e)
				fmt.Fprintf(&b, "-A SY-SVC-%d -m comment --comment \"ns/svc%d:p -> 10.244.%d.%d:8080\" -m statistic --mode random --probability 0.1 -j %s\n", s, s, s/250, e, sep)
			}
			fmt.Fprintf(&b, "-A PREROUTING -d 10.%d.%d.%d/32 -p tcp -m comment --comment \"ns/svc%d:p cluster IP\" -m tcp --dport 80 -j SY-SVC-%d\n", 96+s/65536, s/256%256, s%256, s, s)
		}
		b.WriteString("COMMIT\n")
		if err := r.Restore(ctx, IPv4, []byte(b.String())); err != nil {
			t.Fatalf("restore services %d..: %v", first, err)
		}
	}
	t.Logf("%s: restored %d services x 10 endpoints in %v", r.mode, n, time.Since(start).Round(time.Millisecond))
	for range 3 {
		cpu0, start := kerneltest.ProcessCPU(), time.Now()
		counts, err := r.CountRules(ctx, IPv4, "nat")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: CountRules(nat) of %d chains: %v wall, %v CPU", r.mode, len(counts.Rules),
			time.Since(start).Round(time.Millisecond), (kerneltest.ProcessCPU() - cpu0).Round(time.Millisecond))
	}
	if r.mode == ModeNFT {
		for range 3 {
			cpu0, start := kerneltest.ProcessCPU(), time.Now()
			uses, err := r.ChainUses(ctx, IPv4)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("ChainUses of %d nat chains: %v wall, %v CPU", len(uses["nat"]), time.Since(start).Round(time.Millisecond),
				(kerneltest.ProcessCPU() - cpu0).Round(time.Millisecond))
		}
	}
	start = time.Now()
	if _, err := r.SaveTable(ctx, IPv4, "nat"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: iptables-save -t nat: %v wall", r.mode, time.Since(start).Round(time.Millisecond))
}
