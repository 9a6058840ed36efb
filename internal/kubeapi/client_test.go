package kubeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// apiServer answers lists, watches (one ADDED event, then held open) and
// Node GETs in the media type asked for, and records each request as
// "group/resource:verb" with its label selector.
type apiServer struct {
	t      *testing.T
	codecs serializer.CodecFactory
	mu     sync.Mutex
	seen   map[string]string // request -> label selector
	media  map[string]bool   // media types answered
}

func newAPIServer(t *testing.T) (*apiServer, *httptest.Server) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	_ = discovery.AddToScheme(scheme)
	_ = eventsv1.AddToScheme(scheme)
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	a := &apiServer{t: t, codecs: serializer.NewCodecFactory(scheme), seen: map[string]string{}, media: map[string]bool{}}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, srv
}

// route maps a path to the request's group, resource, item and version.
func route(path string) (group, resource string, obj runtime.Object, gv schema.GroupVersion) {
	switch path {
	case "/api/v1/services":
		return "", "services", &v1.ServiceList{Items: []v1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}}}, v1.SchemeGroupVersion
	case "/apis/discovery.k8s.io/v1/endpointslices":
		return "discovery.k8s.io", "endpointslices", &discovery.EndpointSliceList{Items: []discovery.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns"}}}}, discovery.SchemeGroupVersion
	case "/api/v1/nodes":
		return "", "nodes", &v1.NodeList{Items: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}}}, v1.SchemeGroupVersion
	case "/api/v1/nodes/node-a":
		return "", "nodes", &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, v1.SchemeGroupVersion
	case "/apis/events.k8s.io/v1/namespaces/default/events":
		return "events.k8s.io", "events", &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "node-a.1", Namespace: "default"}}, eventsv1.SchemeGroupVersion
	}
	return "", "", nil, schema.GroupVersion{}
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	group, resource, obj, gv := route(r.URL.Path)
	if obj == nil {
		http.NotFound(w, r)
		return
	}
	verb := "list"
	switch {
	case r.URL.Query().Get("watch") == "true":
		verb = "watch"
	case strings.HasSuffix(r.URL.Path, "/node-a"):
		verb = "get"
	case r.Method == http.MethodPost:
		verb = "create"
	}
	a.mu.Lock()
	a.seen[group+"/"+resource+":"+verb] = r.URL.Query().Get("labelSelector")
	a.mu.Unlock()
	mediaType := strings.Split(r.Header.Get("Accept"), ",")[0]
	info, ok := runtime.SerializerInfoForMediaType(a.codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		info, _ = runtime.SerializerInfoForMediaType(a.codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	}
	a.mu.Lock()
	a.media[info.MediaType] = true
	a.mu.Unlock()
	if verb != "watch" {
		w.Header().Set("Content-Type", info.MediaType)
		if err := a.codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, w); err != nil {
			a.t.Error(err)
		}
		return
	}
	a.watch(w, r, info, obj, gv)
}

// watch sends the list's first item as an ADDED event and holds the
// stream open until the client goes.
func (a *apiServer) watch(w http.ResponseWriter, r *http.Request, info runtime.SerializerInfo, list runtime.Object, gv schema.GroupVersion) {
	items, _ := meta.ExtractList(list)
	var raw strings.Builder
	if err := a.codecs.EncoderForVersion(info.Serializer, gv).Encode(items[0], &raw); err != nil {
		a.t.Error(err)
		return
	}
	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(http.StatusOK)
	enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(w), info.StreamSerializer.Serializer)
	ev := &metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: []byte(raw.String())}}
	if err := enc.Encode(ev); err != nil {
		a.t.Error(err)
		return
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// TestClientRequests lists, watches and gets through a Client in JSON and
// protobuf, and checks it made exactly the requests Requests names, with
// the selector asked for.
func TestClientRequests(t *testing.T) {
	for _, ct := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(ct, func(t *testing.T) {
			a, srv := newAPIServer(t)
			c, err := New(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: ct}})
			if err != nil {
				t.Fatal(err)
			}
			sel := func(o *metav1.ListOptions) { o.LabelSelector = "a=b" }
			for _, r := range []Resource{Services, EndpointSlices, Nodes} {
				checkListWatch(t, c.ListerWatcher(r, sel), r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if node, err := c.Node(ctx, "node-a"); err != nil || node.Name != "node-a" {
				t.Errorf("Node = %v, %v", node, err)
			}
			ev := NodeEvent("node-a", "switchyard", v1.EventTypeNormal, "Starting", "StartKubeProxy", "", time.Unix(1, 0))
			if err := c.(EventSink).CreateEvent(ctx, ev); err != nil {
				t.Errorf("CreateEvent: %v", err)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if len(a.media) != 1 || !a.media[ct] {
				t.Errorf("answered in %v, want %s only", a.media, ct)
			}
			var got []string
			for req, s := range a.seen {
				got = append(got, req)
				if !strings.HasSuffix(req, ":get") && !strings.HasSuffix(req, ":create") && s != "a=b" {
					t.Errorf("%s: label selector %q, want a=b", req, s)
				}
			}
			if want := Requests(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("requests %v, want %v", slices.Sorted(slices.Values(got)), want)
			}
		})
	}
}

// checkListWatch lists r (one item) and watches it (one ADDED event).
func checkListWatch(t *testing.T, lw cache.ListerWatcher, r Resource) {
	t.Helper()
	list, err := lw.List(metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s list: %v", r, err)
	}
	if items, err := meta.ExtractList(list); err != nil || len(items) != 1 {
		t.Errorf("%s list: %d items, %v; want 1", r, len(items), err)
	}
	w, err := lw.Watch(metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatalf("%s watch: %v", r, err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object == nil {
			t.Errorf("%s watch: %v %T, want ADDED", r, ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s watch: no event", r)
	}
}
