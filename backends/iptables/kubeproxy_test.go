package iptables

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestRenderMatchesKubeProxy renders the services of the recorded
// kube-proxy v1.37.1 sample (shared/recipes/apiserver/kube-proxy-rules-sample.txt,
// copied to testdata) and compares the rules of the chains kube-proxy owns
// with what kube-proxy wrote, after the normalisations iptables-save itself
// applies (mark syntax, probability digits). Rules are compared sorted per
// chain only where kube-proxy's order is a map order (KUBE-SERVICES,
// KUBE-NODEPORTS); everywhere else order matters.
func TestRenderMatchesKubeProxy(t *testing.T) {
	raw, err := os.ReadFile("testdata/kube-proxy-rules-sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := ownedRules(string(raw), true)

	demo := svc("default", "demo", "http", v1.ProtocolTCP, 80, "10.96.139.100")
	demo2 := svc("default", "demo2", "http", v1.ProtocolTCP, 80, "10.96.162.188")
	web := with(svc("default", "web", "http", v1.ProtocolTCP, 80, "10.96.203.130"), nodePort(30080))
	dns := with(svc("default", "web", "dns", v1.ProtocolUDP, 53, "10.96.203.130"), nodePort(32074))
	kube := svc("default", "kubernetes", "https", v1.ProtocolTCP, 443, "10.96.0.1")
	webEps := func(port string) []proxier.Endpoint {
		return []proxier.Endpoint{ep("10.244.0.11:" + port), ep("10.244.1.12:" + port), ep("10.244.2.13:" + port)}
	}
	st := stateOf(nil, []*proxier.ServicePort{demo, demo2, web, dns, kube}, epMap{
		demo.Name:  {ep("10.244.1.10:8080"), ep("10.244.2.10:8080", notReady)},
		demo2.Name: {ep("10.244.3.30:8080")},
		web.Name:   webEps("8080"),
		dns.Name:   webEps("5353"),
	})
	cfg := testConfig()
	cfg.LocalhostNodePorts = true // kube-proxy's default
	got := ownedRules(render(cfg.forFamily(v1.IPv4Protocol), st).String(), false)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("render differs from kube-proxy (-kube-proxy +switchyard):\n%s", diff)
	}
}

// ownedRules returns, per "table chain", the normalised rules of the KUBE-*
// chains in restore/save text.
func ownedRules(text string, fromSave bool) map[string][]string {
	prob := regexp.MustCompile(`--probability (0\.\d{5})\d*`)
	out := map[string][]string{}
	var tbl string
	for _, line := range strings.Split(text, "\n") {
		// The nfacct counter on the INVALID drop is not implemented.
		line = strings.Replace(line, " -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts", "", 1)
		switch {
		case strings.HasPrefix(line, "*"):
			tbl = line[1:]
			continue
		case !strings.HasPrefix(line, "-A KUBE-"), strings.Contains(line, "nfacct"):
			// Built-in chains are not in the payload; kube-proxy's extra
			// localhost NodePort rule only feeds an nfacct counter.
			continue
		}
		if fromSave {
			line = strings.ReplaceAll(line, "-j MARK --set-xmark 0x4000/0x4000", "-j MARK --or-mark 0x4000")
			line = strings.ReplaceAll(line, "-j MARK --set-xmark 0x4000/0x0", "-j MARK --xor-mark 0x4000")
		}
		line = prob.ReplaceAllString(line, "--probability $1")
		chain := strings.Fields(line)[1]
		out[tbl+" "+chain] = append(out[tbl+" "+chain], line)
	}
	for k, rules := range out {
		if strings.HasSuffix(k, " "+chainServices) || strings.HasSuffix(k, " "+chainNodePorts) {
			slices.Sort(rules)
		}
	}
	return out
}
