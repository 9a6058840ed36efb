package app

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// checkDurations walks the decoded JSON tree alongside the Go type it will be
// decoded into and reports the first duration that does not parse, naming
// its field path. (metav1.Duration's own decoder reports no path.)
func checkDurations(node any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if node == nil {
		return nil
	}
	if t == reflect.TypeFor[metav1.Duration]() {
		s, ok := node.(string)
		if !ok {
			return fmt.Errorf("invalid %s %s: must be a duration string such as \"30s\"", path, quoteAny(node))
		}
		if _, err := time.ParseDuration(s); err != nil {
			return fmt.Errorf("invalid %s %q: %w", path, s, err)
		}
		return nil
	}
	obj, ok := node.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		return nil
	}
	fields := jsonFields(t)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft, known := fields[k]
		if !known {
			continue
		}
		if err := checkDurations(obj[k], ft, joinPath(path, k)); err != nil {
			return err
		}
	}
	return nil
}

// jsonFields maps a struct's JSON field names to their types, flattening
// embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				fields[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// ignoredFields lists the fields set in the file that switchyard does not
// implement. Zero values (which kubeadm writes everywhere) are not listed.
func ignoredFields(k *kubeproxyv1alpha1.KubeProxyConfiguration) []string {
	checks := []struct {
		path string
		set  bool
	}{
		{"nftables", flagSection(string(k.Mode)) != "nftables" && !reflect.ValueOf(k.NFTables).IsZero()},
		{"winkernel", !reflect.ValueOf(k.Winkernel).IsZero()},
		{"portRange", k.PortRange != ""},
		{"windowsRunAsService", k.WindowsRunAsService},
	}
	var out []string
	for _, c := range checks {
		if c.set {
			out = append(out, c.path)
		}
	}
	return out
}

// fieldNotes classifies every KubeProxyConfiguration field that no
// setting (settings()) maps: how switchyard treats it, and why.
// TestEveryConfigFieldClassified walks the official type, so a field added
// upstream fails that test until it is listed here or mapped.
var fieldNotes = map[string]string{
	"apiVersion":                          "checked: must be kubeproxy.config.k8s.io/v1alpha1",
	"kind":                                "checked: must be KubeProxyConfiguration",
	"logging":                             "honoured: component-base's logging configuration, merged with the logging flags",
	"clientConnection.acceptContentTypes": "honoured: the API client's Accept header",
	"nftables.masqueradeAll":              "honoured in nftables mode (overrides iptables.masqueradeAll)",
	"nftables.masqueradeBit":              "honoured in nftables mode (overrides iptables.masqueradeBit)",
	"nftables.syncPeriod":                 "honoured in nftables mode (overrides iptables.syncPeriod)",
	"nftables.minSyncPeriod":              "honoured in nftables mode (overrides iptables.minSyncPeriod)",
	"winkernel.networkName":               "Windows only: warned when set",
	"winkernel.sourceVip":                 "Windows only: warned when set",
	"winkernel.enableDSR":                 "Windows only: warned when set",
	"winkernel.rootHnsEndpointName":       "Windows only: warned when set",
	"winkernel.forwardHealthCheckVip":     "Windows only: warned when set",
	"windowsRunAsService":                 "Windows only: warned when set",
	"portRange":                           "no meaning: kube-proxy ignores it too (its userspace mode is gone); switchyard's userspace proxy listens on ephemeral ports. Warned when set",
}
