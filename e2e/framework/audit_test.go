package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// auditSample is what kube-apiserver v1.37 writes (trimmed of fields
// ReadAudit ignores): a list and the watch from its resourceVersion, a
// watch that resumes, a streaming list, another user's list, and a failed
// list.
const auditSample = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless&limit=500&resourceVersion=0","verb":"list","user":{"username":"system:serviceaccount:kube-system:switchyard"},"objectRef":{"resource":"endpointslices","apiGroup":"discovery.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T08:00:00.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseStarted","requestURI":"/apis/discovery.k8s.io/v1/endpointslices?allowWatchBookmarks=true&resourceVersion=1234&timeoutSeconds=400&watch=true","verb":"watch","user":{"username":"system:serviceaccount:kube-system:switchyard"},"objectRef":{"resource":"endpointslices","apiGroup":"discovery.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T08:00:01.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseStarted","requestURI":"/api/v1/services?allowWatchBookmarks=true&resourceVersion=1300&watch=true","verb":"watch","user":{"username":"system:serviceaccount:kube-system:switchyard"},"objectRef":{"resource":"services","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T08:05:00.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseStarted","requestURI":"/api/v1/services?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true","verb":"watch","user":{"username":"system:serviceaccount:kube-system:kube-proxy"},"objectRef":{"resource":"services","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T08:05:00.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/services?limit=500&resourceVersion=0","verb":"list","user":{"username":"system:serviceaccount:kube-system:kube-proxy"},"objectRef":{"resource":"services","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-29T08:05:01.000000Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/services?limit=500&resourceVersion=0","verb":"list","user":{"username":"system:serviceaccount:kube-system:switchyard"},"objectRef":{"resource":"services","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":403},"requestReceivedTimestamp":"2026-11-29T08:05:02.000000Z"}
`

func TestListsAndWatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(auditSample), 0o600); err != nil {
		t.Fatal(err)
	}
	events, err := ReadAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 6 {
		t.Fatalf("read %d events, want 6", len(events))
	}
	const sy, kp = "system:serviceaccount:kube-system:switchyard", "system:serviceaccount:kube-system:kube-proxy"
	for _, c := range []struct {
		user          string
		since         time.Time
		lists, fromRV map[string]int
	}{
		{sy, time.Time{}, map[string]int{"endpointslices": 1}, map[string]int{"endpointslices": 1, "services": 1}},
		{sy, time.Date(2026, 11, 29, 8, 1, 0, 0, time.UTC), map[string]int{}, map[string]int{"services": 1}},
		{kp, time.Time{}, map[string]int{"services": 2}, map[string]int{}},
	} {
		lists, fromRV := ListsAndWatches(events, c.user, c.since)
		if !cmp.Equal(lists, c.lists) || !cmp.Equal(fromRV, c.fromRV) {
			t.Errorf("%s since %v: lists %v watches from the last RV %v, want %v and %v", c.user, c.since, lists, fromRV, c.lists, c.fromRV)
		}
	}
}

func TestReadAuditRefusesAPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	first, _, _ := strings.Cut(auditSample, "\n")
	if err := os.WriteFile(path, []byte(first+"\n"+first[:40]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAudit(path); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("ReadAudit of a partial second line: %v, want an error naming line 2", err)
	}
}

func TestAuditArgs(t *testing.T) {
	dir := t.TempDir()
	args, logPath, err := AuditArgs(dir, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := os.ReadFile(filepath.Join(dir, "audit-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(policy), `users: ["a","b"]`) || len(args) != 3 || !strings.HasSuffix(args[1], logPath) {
		t.Errorf("policy:\n%s\nargs %v, log %s", policy, args, logPath)
	}
}
