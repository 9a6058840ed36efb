# switchyard — make targets. `make test` is what CI runs (.ci/run).
GO        ?= go
BIN       := bin/switchyard
PKGS      := ./...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/switchyard-proxy/switchyard/cmd/switchyard/app.Version=$(VERSION)
# Kernel tests change iptables/conntrack state; they run only as root and
# only inside network namespaces the tests create themselves.
KERNEL_ENV := SWITCHYARD_KERNEL_TESTS=1

.PHONY: all build build-linux test unit kernel e2e vm e2e-vm bench demo lint chart clean tools bench-dataplane bench-dataplane-vm hollow conntrack-scale outage soak deps image cluster cluster-down node-smoke node-smoke-all node-monitoring conformance

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/switchyard

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/...
	$(GO) vet -tags node ./e2e/node/

unit:
	$(GO) test -race -count=1 $(PKGS)

# The Helm chart: helm (built from hack/tools/helm, cached) lints it, and
# deploy/helm's test checks that its defaults render deploy/'s objects.
chart:
	@helm="$$(hack/build-tools.sh helm | tail -n1)/helm"; \
	  $$helm lint --strict deploy/helm/switchyard && \
	  SWITCHYARD_HELM=$$helm $(GO) test -count=1 ./deploy/helm/

kernel:
	$(KERNEL_ENV) $(GO) test -count=1 -p 1 $(PKGS)

tools:
	hack/build-tools.sh >/dev/null

# Debian packages the demo and the tests use (installed only if missing).
deps:
	hack/install-deps.sh

e2e: build tools
	SWITCHYARD_BIN=$(CURDIR)/$(BIN) $(GO) test -tags e2e -count=1 -p 1 -timeout 20m -v ./e2e/...

# IPVS and the dummy interface are not in this host's kernel: those tests
# boot Debian's kernel in QEMU (hack/vm).
vm:
	hack/vm/test-ipvs.sh

# The real daemon in ipvs mode inside the VM, against a control plane on
# the host's loopback (reached through one QEMU guestfwd).
e2e-vm: tools
	hack/vm/e2e-ipvs.sh

test: deps lint chart unit kernel e2e vm e2e-vm node-smoke-all

bench:
	hack/bench.sh

# What each mode costs traffic through a Service at N Services, beside the
# direct path and kube-proxy (not part of `make test`), in IPv4-only or
# (FAMILY=ipv6) IPv6-only topologies with single-stack Services:
# make bench-dataplane [SIZES="1000 10000 44000"] [FAMILY=ipv4|ipv6] [DURATION=3s] [ROUNDS=3] [SKIP=...] [SYNC_WAIT=10m]
bench-dataplane:
	hack/bench/dataplane.sh

# The same benchmark inside the QEMU VM (TCG), for ipvs, which this host's
# kernel lacks, beside the direct path and nftables/iptables in the VM; its
# lines carry env=vm-tcg (only ratios and their trend in N compare):
# make bench-dataplane-vm [SIZES="1000 10000"] [DURATION=3s] [ROUNDS=3] [PATHS=...]
bench-dataplane-vm: tools
	hack/vm/bench-dataplane-vm.sh

# N hollow proxies against one real apiserver holding SERVICES Services,
# switchyard's (`switchyard hollow --count N`, one process) then upstream's
# (N `kubemark --morph=proxy`), at each N in turn: the apiserver's CPU and
# RSS, watch bytes, memory per proxy, an endpoint change's fan-out to all N
# (docs/scale.md, "100 hollow nodes"; not part of `make test`):
# make hollow [N="10 50 100"] [SERVICES=10000] [ENDPOINTS=10] [CHANGES=50] [PROXIES="switchyard kube-proxy"]
N ?= 10 50 100
SERVICES ?= 10000
ENDPOINTS ?= 10
CHANGES ?= 50
PROXIES ?= switchyard kube-proxy
hollow: build
	@kubemark="$$(hack/build-tools.sh kubemark | tail -n1)/kubemark" && \
	  SWITCHYARD_BIN=$(CURDIR)/$(BIN) SWITCHYARD_KUBEMARK=$$kubemark HOLLOW_N="$(N)" HOLLOW_SERVICES=$(SERVICES) \
	  HOLLOW_ENDPOINTS=$(ENDPOINTS) HOLLOW_CHANGES=$(CHANGES) HOLLOW_PROXIES="$(PROXIES)" \
	  $(GO) test -tags e2e -count=1 -timeout 180m -run '^TestHollow$$' -v ./e2e/hollow/

# Stale UDP conntrack cleanup in a table of ENTRIES entries, switchyard and
# kube-proxy side by side (not part of `make test`; raises the machine-wide
# nf_conntrack_max and nf_conntrack_buckets for the run and restores them):
# make conntrack-scale [ENTRIES=1000000] [PROXIES="switchyard kube-proxy"] [PATIENCE=5m]
# [FAMILY=ipv4|ipv6]
ENTRIES ?= 1000000
conntrack-scale:
	ENTRIES=$(ENTRIES) FAMILY=$(FAMILY) hack/bench/conntrack-scale.sh

# The apiserver goes away under switchyard and kube-proxy side by side
# (hack/outage.sh): make outage [OUTAGE_DOWN=120] [OUTAGE_LONG=600]
# [SERVICES=10000] [CHANGED=100] [MODE=iptables] [ETCD_DOWN=20] [OUT=file]
outage:
	hack/outage.sh

# switchyard and kube-proxy side by side under an hour of API churn at 10k
# Services x 10 endpoints: memory, goroutines, fds, syncs, kernel vs API,
# failed connections (not part of `make test`; needs root):
# make soak [SOAK_MIN=60] [MODE=nftables|iptables] [SERVICES=10000] [ENDPOINTS=10] [OUT=file]
soak:
	SOAK_MIN=$(SOAK_MIN) MODE=$(if $(filter file,$(origin MODE)),nftables,$(MODE)) hack/soak.sh

# make demo [MODE=iptables|nftables|userspace] [KEEP=1]
MODE ?= iptables
SOAK_MIN ?= 60
demo: deps build tools
	SWITCHYARD_DEMO=1 SWITCHYARD_DEMO_MODE=$(MODE) SWITCHYARD_DEMO_KEEP=$(KEEP) SWITCHYARD_BIN=$(CURDIR)/$(BIN) \
		$(GO) test -tags e2e -count=1 -timeout 30m -run '^TestDemo$$' -v ./e2e/ 2>&1 | grep -v '^=== RUN'

# The static daemon for each image architecture, cross-compiled:
# bin/linux-<arch>/switchyard.
IMAGE_ARCHES ?= amd64 arm64
build-linux:
	for a in $(IMAGE_ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/linux-$$a/switchyard ./cmd/switchyard || exit 1; done

# The node image, built here without an engine or a registry (hack/image):
# _output/images/switchyard-$(VERSION).tar, an oci-archive of an image index
# (linux/amd64 and linux/arm64) tagged localhost/switchyard:$(VERSION), with an
# SPDX SBOM per architecture; then hack/image/check.sh (index, SBOMs, and each
# architecture's switchyard and iptables run, arm64 under qemu-user) and
# hack/image/boot-arm64.sh (the arm64 image booted on Debian's arm64 kernel in
# qemu-system-aarch64: iptables-nft programs a rule). Not part of `make test`:
# a cold build takes minutes (two mmdebstrap runs, one emulated).
image: deps
	VERSION=$(VERSION) IMAGE_ARCHES="$(IMAGE_ARCHES)" hack/image/build.sh switchyard
	VERSION=$(VERSION) hack/image/check.sh _output/images/switchyard-$(VERSION).tar
	case " $(IMAGE_ARCHES) " in *" arm64 "*) hack/image/boot-arm64.sh _output/images/switchyard-$(VERSION).tar ;; esac

# A real cluster on this machine (hack/cluster): control plane, two kubelet
# nodes, switchyard applied from deploy/ in $(MODE). Ends with `export KUBECONFIG=...`.
# FAMILY: the cluster's address families, ipv4, ipv6 (ULA only) or dual.
FAMILY ?= ipv4
cluster: deps
	VERSION=$(VERSION) MODE=$(MODE) FAMILY=$(FAMILY) hack/cluster/cluster.sh up

cluster-down:
	hack/cluster/cluster.sh down

# The smoke test on the real node: cluster up, deploy/ Ready, ClusterIP /
# DNS / NodePort from a pod, a rolling update with zero failed connections,
# cluster down.
DEPLOY ?= kustomize
node-smoke: deps build
	VERSION=$(VERSION) MODE=$(MODE) FAMILY=$(FAMILY) DEPLOY=$(DEPLOY) hack/cluster/smoke.sh

# The smoke test in every host mode (ipvs needs IP_VS, which this kernel
# lacks): nftables on a dual-stack cluster (both families checked), installed
# and upgraded with Helm; iptables and userspace on IPv4 with kustomize.
node-smoke-all: deps build
	for mfd in iptables:ipv4:kustomize nftables:dual:helm userspace:ipv4:kustomize; do \
	  m=$${mfd%%:*}; rest=$${mfd#*:}; \
	  VERSION=$(VERSION) MODE=$$m FAMILY=$${rest%%:*} DEPLOY=$${rest#*:} hack/cluster/smoke.sh || exit 1; done

# Dashboards and alerts on the real cluster against Debian's Prometheus (not
# part of test: ~5 min): every mixin and switchyard query returns data, every
# alert fires, the dashboard is drawn to docs/img/dashboard.png.
node-monitoring: deps build
	VERSION=$(VERSION) hack/cluster/monitoring.sh

# Upstream's [sig-network] e2e suite on the local cluster (not part of test):
# make conformance MODE=iptables|nftables|userspace [FAMILY=ipv4|ipv6|dual] [PROXY=switchyard|kube-proxy]
PROXY ?= switchyard
conformance: deps
	VERSION=$(VERSION) MODE=$(MODE) FAMILY=$(FAMILY) PROXY=$(PROXY) hack/cluster/conformance.sh

clean:
	rm -rf bin
	$(GO) clean -testcache
