package hollow

import (
	"testing"
	"time"
)

func TestParseSyncLine(t *testing.T) {
	s, ok := parseSyncLine("hollow-sync node=h-2 at=1795939542604335333 full=false changed=1 services=2 endpoints=2 names=default/s1:http,default/s2:dns")
	if !ok || s.Node != "h-2" || s.At.UnixNano() != 1795939542604335333 || s.Full || len(s.Names) != 2 || s.Names[1] != "default/s2:dns" {
		t.Errorf("parsed %+v, %v", s, ok)
	}
	s, ok = parseSyncLine("hollow-sync node=h-0 at=1 full=true changed=2 services=2 endpoints=1")
	if !ok || !s.Full || s.Names != nil {
		t.Errorf("full sync parsed %+v, %v", s, ok)
	}
	for _, bad := range []string{
		"", "hollow-ready count=3 heap_live_bytes=1 gc_percent=50", "hollow-sync at=1", "hollow-sync node=a at=x",
		"hollow-sync node= at=1", "I1129 08:05:38.631549   12531 hollow.go:119] hollow-sync",
	} {
		if _, ok := parseSyncLine(bad); ok {
			t.Errorf("%q parsed as a sync", bad)
		}
	}
	if !readyLine("hollow-ready count=3 heap_live_bytes=2166336 gc_percent=50") || readyLine("hollow-sync node=a at=1") {
		t.Error("readyLine")
	}
}

func TestKubemarkLines(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 10, 0, 0, time.UTC)
	slice, at, ok := kubemarkSliceAdd(`I1129 08:05:55.896632   12914 config.go:125] "Calling handler.OnEndpointSliceAdd" endpoints="default/s1-probe"`, now)
	want := time.Date(2026, 11, 29, 8, 5, 55, 896632000, time.UTC)
	if !ok || slice != "default/s1-probe" || !at.Equal(want) {
		t.Errorf("got %q %v %v", slice, at, ok)
	}
	for _, bad := range []string{
		`I1129 08:05:50.834018   12914 config.go:219] "Calling handler.OnServiceAdd"`,
		`I1129 08:05:50.834018   12914 config.go:142] "Calling handler.OnEndpointSliceUpdate"`,
		`garbage "Calling handler.OnEndpointSliceAdd" endpoints="default/x"`,
		`I1129 08:05:50.834018 config.go:125] "Calling handler.OnEndpointSliceAdd" endpoints="`,
	} {
		if _, _, ok := kubemarkSliceAdd(bad, now); ok {
			t.Errorf("%q parsed as a slice add", bad)
		}
	}
	if kubemarkSynced(`I1129 08:05:50.925883   12914 config.go:113] "Calling handler.OnEndpointSlicesSynced()"`) != "slices" ||
		kubemarkSynced(`I1129 08:05:50.925851   12914 config.go:207] "Calling handler.OnServiceSynced()"`) != "services" ||
		kubemarkSynced(`I1129 08:05:50.925920   12914 shared_informer.go:510] "Caches are synced"`) != "" {
		t.Error("kubemarkSynced")
	}
}

func TestKlogTimeAcrossTheYear(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC)
	at, ok := klogTime("I1231 23:59:59.500000 1 x.go:1] m", now)
	if !ok || at.Year() != 2026 || at.Month() != 12 {
		t.Errorf("got %v %v", at, ok)
	}
}
