package restmetrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// TestRequestsCounted: a request made through a client-go REST client
// after Install is counted under kube-proxy's family names and labels.
func TestRequestsCounted(t *testing.T) {
	Install()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collectors()...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	codecs := serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	c, err := rest.UnversionedRESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{NegotiatedSerializer: codecs}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Get().AbsPath("/version").DoRaw(context.Background())
	want := map[string]int{"rest_client_requests_total": 1, "rest_client_request_duration_seconds": 1, "rest_client_rate_limiter_duration_seconds": 1}
	for name, n := range want {
		if got := testutil.CollectAndCount(reg, name); got != n {
			t.Errorf("%s: %d series after one request, want %d", name, got, n)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
