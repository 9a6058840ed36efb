package framework

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestLoopbackHostPort(t *testing.T) {
	tests := []struct {
		server  string
		want    string
		wantErr bool
	}{
		{server: "https://127.0.0.1:6443", want: "127.0.0.1:6443"},
		{server: "https://[::1]:16443", want: "[::1]:16443"},
		{server: "https://127.0.0.1", wantErr: true},
		{server: "https://10.0.0.1:6443", wantErr: true},
		{server: "https://localhost:6443", wantErr: true},
	}
	for _, tc := range tests {
		got, err := loopbackHostPort(tc.server)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("loopbackHostPort(%q) = %q, %v; want %q, error %v", tc.server, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestTokenKubeconfigRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	cfg := TokenKubeconfig("https://127.0.0.1:6443", []byte("CA"), "system:serviceaccount:kube-system:switchyard", "tok")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:6443" || rc.BearerToken != "tok" || string(rc.CAData) != "CA" {
		t.Errorf("loaded config host %q token %q ca %q", rc.Host, rc.BearerToken, rc.CAData)
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Errorf("ports %v: %d is invalid or repeated", ports, p)
		}
		seen[p] = true
	}
}
