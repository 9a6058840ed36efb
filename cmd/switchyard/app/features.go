package app

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// The gates switchyard acts on (the rest are accepted, as kube-proxy
// accepts every Kubernetes gate, and change nothing here).
const (
	// featureKubeProxyIPVS off makes ipvs an invalid mode, as in
	// kube-proxy.
	featureKubeProxyIPVS featuregate.Feature = "KubeProxyIPVS"
	// featureNFTablesLocalhostNodePorts asks kube-proxy's nftables mode for
	// localhost NodePorts. switchyard serves them whenever the NodePort
	// addresses name loopback; setting the gate to false turns that off
	// (localhostNodePortFamilies).
	featureNFTablesLocalhostNodePorts featuregate.Feature = "KubeProxyNFTablesLocalhostNodePorts"
)

// newFeatureGate returns a gate that knows kube-proxy's gates
// (kubefeatures.go) and the logging gates, with the given settings
// applied. Unknown gates, locked gates set against their value and the like
// fail with featuregate's messages (kube-proxy's).
func newFeatureGate(settings map[string]bool) (featuregate.FeatureGate, error) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(kubeProxyFeatureGates); err != nil {
		return nil, err
	}
	if err := logsapi.AddFeatureGates(fg); err != nil {
		return nil, err
	}
	if err := fg.SetFromMap(settings); err != nil {
		return nil, err
	}
	return fg, nil
}

// featureGatesHelp is --feature-gates' usage: kube-proxy's sentence and the
// known gates.
func featureGatesHelp() string {
	fg, err := newFeatureGate(nil)
	if err != nil {
		return "A set of key=value pairs that describe feature gates for alpha/experimental features."
	}
	known := fg.(featuregate.MutableFeatureGate).KnownFeatures()
	sort.Strings(known)
	return "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n" +
		strings.Join(known, "\n")
}

// featureGates validates the merged gate settings and checks the mode
// against them.
func (v *validator) featureGates(mode Mode) featuregate.FeatureGate {
	fg, err := newFeatureGate(v.raw.FeatureGates)
	if err != nil {
		v.fail("feature-gates", mapString(v.raw.FeatureGates), err.Error())
		fg, _ = newFeatureGate(nil)
		return fg
	}
	if s := specOf(mode); s != nil && s.gate != "" && !fg.Enabled(s.gate) {
		v.fail("proxy-mode", string(mode), fmt.Sprintf("%s mode is disabled by the %s feature gate", mode, s.gate))
	}
	return fg
}

func mapString(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%t", k, m[k])
	}
	return strings.Join(parts, ",")
}
