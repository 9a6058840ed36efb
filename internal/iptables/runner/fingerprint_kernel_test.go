package runner

import (
	"context"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// TestKernelFingerprint: in a fresh namespace, the fingerprint stays put
// while nobody writes and changes when a chain is flushed behind the
// runner's back, on both iptables modes and both families.
func TestKernelFingerprint(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{ModeNFT, ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "sy-fp-"+mode[:3])
			r, err := New(Options{Mode: mode, Netns: ns})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx := context.Background()
			if err := r.Restore(ctx, IPv4, []byte(kernelPayload)); err != nil {
				t.Fatalf("restore: %v", err)
			}
			before := fingerprint(t, r, IPv4)
			if again := fingerprint(t, r, IPv4); again != before {
				t.Errorf("fingerprint moved without a write: %x -> %x", before, again)
			}
			if err := r.FlushChain(IPv4, "nat", "SY-TEST-SVC"); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if after := fingerprint(t, r, IPv4); after == before {
				t.Errorf("fingerprint %x unchanged after flushing a chain", after)
			}
			fingerprint(t, r, IPv6) // readable for the other family too
		})
	}
}

func fingerprint(t *testing.T, r *Runner, fam Family) uint64 {
	t.Helper()
	fp, err := r.Fingerprint(context.Background(), fam)
	if err != nil {
		t.Fatalf("Fingerprint(%v): %v", fam, err)
	}
	return fp
}
