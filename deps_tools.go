//go:build tools

// This file pins dependencies that packages under construction will use, so
// that `go mod tidy` keeps them while parallel work lands. It is never built.
package switchyard

import (
	_ "github.com/coreos/go-iptables/iptables"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/moby/ipvs"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/collectors"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/pflag"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/discovery/v1"
	_ "k8s.io/apimachinery/pkg/util/sets"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/klog/v2"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)
