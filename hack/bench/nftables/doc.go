// Command nftables is the scale harness of the nftables proxy mode
// (`make bench`). For each scale it runs, in a fresh network namespace per
// run, the real proxier (informers over a fake clientset holding the
// Services and EndpointSlices, trackers, runner) with the nftables backend
// over netlink, and measures:
//
//   - the first full sync (the backend's Sync, and from start including
//     the informers' initial list), and RSS after it;
//   - one-endpoint changes (one EndpointSlice update replacing one
//     endpoint address), end to end from the API update to the sync that
//     wrote it, with this process's kernel (system) and own (user) CPU;
//   - new services with 10 endpoints (Service then EndpointSlice created),
//     until a sync wrote the service with all its endpoints;
//
// and, in another fresh namespace, the floor: `nft -f` of the very same
// ruleset, as nft text dumped by the strict fake after the same render.
//
// With -rows it runs instead the end-to-end suite of issue 16 for each of
// -suite-backends (nftables, iptables-nft, iptables-legacy), with the sync
// periods the daemon gets from its default flags: new services (Service,
// then its EndpointSlice, as a controller writes them) on 1k services, up
// to the end of the sync that wrote both, with the syncs each took; and a
// burst of EndpointSlice updates spread evenly over 10 s at 10k services,
// with the syncs, the CPU of this process and its iptables children over
// the burst, and per-update latency. It writes the rows for the iptables
// harness's table (its -e2e flag), which `make bench` prints.
package main
