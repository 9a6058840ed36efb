package app

import (
	"reflect"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

// leafPaths lists the JSON paths of t's settable fields: structs are
// walked, except the types that are one setting (durations, the logging
// configuration).
func leafPaths(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[metav1.Duration]() || t == reflect.TypeFor[logsapi.LoggingConfiguration]() {
		*out = append(*out, prefix)
		return
	}
	for name, ft := range jsonFields(t) {
		leafPaths(ft, joinPath(prefix, name), out)
	}
}

// TestEveryConfigFieldClassified: every field of the official
// KubeProxyConfiguration is either mapped to a setting or classified in
// fieldNotes, and fieldNotes names only fields that exist unmapped.
func TestEveryConfigFieldClassified(t *testing.T) {
	var paths []string
	leafPaths(reflect.TypeFor[kubeproxyv1alpha1.KubeProxyConfiguration](), "", &paths)
	sort.Strings(paths)
	mapped := map[string]bool{}
	for _, s := range settings() {
		if s.field != "" {
			mapped[s.field] = true
		}
	}
	exists := map[string]bool{}
	for _, p := range paths {
		exists[p] = true
		_, noted := fieldNotes[p]
		switch {
		case mapped[p] && noted:
			t.Errorf("%s is mapped to a flag and also noted in fieldNotes", p)
		case !mapped[p] && !noted:
			t.Errorf("KubeProxyConfiguration field %s is neither mapped to a setting nor classified in fieldNotes", p)
		}
	}
	for p := range fieldNotes {
		if !exists[p] {
			t.Errorf("fieldNotes names %s, which KubeProxyConfiguration does not have", p)
		}
	}
	if len(paths) < 50 {
		t.Errorf("walked only %d fields: the walk is broken", len(paths))
	}
}
