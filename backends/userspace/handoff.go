package userspace

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// renderInput is what one family's last rules were rendered from.
type renderInput struct {
	rc    renderConfig
	plans []servicePlan
}

// handoffTimeout bounds the restore that hands the traffic to the kernel
// on Close.
const handoffTimeout = 5 * time.Second

// handOff, on Close without the restart fallback's sentinels, rewrites each family's rules so that every service address is DNATed
// straight to its endpoints (the fallback rules, from outside and from
// the node alike) instead of REDIRECTed to the proxy sockets about to
// close. A graceful stop (SIGTERM: a rolling update, a drain) then
// refuses nothing: the kernel serves new connections until the next
// daemon's first sync REDIRECTs them to its own sockets. A SIGKILL leaves
// the REDIRECT rules to closed ports until then. A failed restore is
// logged; the stop goes on.
func handOff(r runner.Interface, rendered map[v1.IPFamily]renderInput, ports map[socketKey]uint16) {
	ctx, cancel := context.WithTimeout(context.Background(), handoffTimeout)
	defer cancel()
	for fam, in := range rendered {
		rc := in.rc
		rc.handoff = true
		if err := r.Restore(ctx, runnerFamily(fam), render(rc, in.plans, ports)); err != nil {
			klog.ErrorS(err, "Handing service traffic to the kernel before stopping failed; new connections are refused until the next start", "family", fam)
			continue
		}
		klog.InfoS("Service traffic handed to the kernel until the next start", "family", fam, "servicePorts", len(in.plans))
	}
}
