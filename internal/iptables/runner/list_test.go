package runner

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

func TestListChain(t *testing.T) {
	x := versions(newScriptedExec(t, both...), "-nft", nftVersion)
	x.on("iptables-nft --wait=3 -t nat -S KUBE-SERVICES", reply{stdout: "-N KUBE-SERVICES\n" +
		"-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -j KUBE-SVC-A\n" +
		"-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n"})
	x.on("iptables-nft --wait=3 -t nat -S PREROUTING", reply{stdout: "-P PREROUTING ACCEPT\n"})
	x.on("iptables-nft --wait=3 -t nat -S GONE", reply{stderr: "iptables: No chain/target/match by that name.\n", err: errors.New("exit status 1")})
	x.on("iptables-nft --wait=3 -t filter -S LOCKED", reply{stderr: "Another app is currently holding the xtables lock.\n", err: errors.New("exit status 4")})
	var log []opsCall
	factory, made := fakeOpsFactory(&log)
	r, err := newRunner(Options{Mode: ModeNFT, WaitSeconds: 3, Exec: x}, factory)
	if err != nil {
		t.Fatal(err)
	}
	made[IPv4].chains["filter/LOCKED"] = nil
	ctx := context.Background()

	rules, ok, err := r.ListChain(ctx, IPv4, "nat", "KUBE-SERVICES")
	want := []string{"-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -j KUBE-SVC-A", "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS"}
	if err != nil || !ok || !cmp.Equal(rules, want) {
		t.Errorf("ListChain(KUBE-SERVICES) = %q, %v, %v; want %q", rules, ok, err, want)
	}
	if rules, ok, err := r.ListChain(ctx, IPv4, "nat", "PREROUTING"); err != nil || !ok || len(rules) != 0 {
		t.Errorf("ListChain(empty built-in) = %q, %v, %v; want no rules", rules, ok, err)
	}
	if _, ok, err := r.ListChain(ctx, IPv4, "nat", "GONE"); err != nil || ok {
		t.Errorf("ListChain(missing) = exists %v, err %v; want false, nil", ok, err)
	}
	// A chain that exists but cannot be listed (lock held past the wait)
	// is an error, not "missing": the caller must not rewrite on it.
	if _, _, err := r.ListChain(ctx, IPv4, "filter", "LOCKED"); err == nil {
		t.Errorf("ListChain(lock held) succeeded")
	}
}

// TestListChainKernel lists chains of a real table in a throwaway
// namespace, for both iptables modes.
func TestListChainKernel(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{ModeNFT, ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			if _, err := exec.LookPath("iptables-" + map[string]string{ModeNFT: "nft", ModeLegacy: "legacy"}[mode]); err != nil {
				t.Skipf("no %s iptables", mode)
			}
			ns := kerneltest.NewNetns(t, "sy-runner-"+"list-"+mode)
			r, err := New(Options{Mode: mode, Netns: ns})
			if err != nil {
				t.Fatal(err)
			}
			payload := "*nat\n:SY-LIST - [0:0]\n-A SY-LIST -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j RETURN\n" +
				"-A SY-LIST -m comment --comment \"a b\" -j RETURN\nCOMMIT\n"
			if err := r.Restore(context.Background(), IPv4, []byte(payload)); err != nil {
				t.Fatal(err)
			}
			rules, ok, err := r.ListChain(context.Background(), IPv4, "nat", "SY-LIST")
			if err != nil || !ok || len(rules) != 2 {
				t.Errorf("ListChain(SY-LIST) = %q, %v, %v; want 2 rules", rules, ok, err)
			}
			if _, ok, err := r.ListChain(context.Background(), IPv4, "nat", "SY-NONE"); ok || err != nil {
				t.Errorf("ListChain(missing) = exists %v, err %v; want false, nil", ok, err)
			}
		})
	}
}
