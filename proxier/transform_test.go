package proxier

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTrimObject(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	annotations := map[string]string{lastAppliedAnnotation: `{"big":"json"}`, "keep": "me"}
	svc := makeService("svc")
	svc.ManagedFields, svc.Annotations = managed, annotations
	slice := makeSlice("svc", "s1", []sliceEP{ep("10.0.0.1")})
	slice.ManagedFields = managed
	slice.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{v1.LabelTopologyZone: "z"}, ManagedFields: managed},
		Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"img"}}}, Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.1.1"}}}}

	for _, obj := range []any{svc, slice, node} {
		if _, err := trimObject(obj); err != nil {
			t.Fatal(err)
		}
	}
	if svc.ManagedFields != nil || slice.ManagedFields != nil || node.ManagedFields != nil {
		t.Error("managedFields kept")
	}
	if _, ok := svc.Annotations[lastAppliedAnnotation]; ok || svc.Annotations["keep"] != "me" {
		t.Errorf("service annotations = %v, want only keep=me", svc.Annotations)
	}
	if _, ok := annotations[lastAppliedAnnotation]; !ok {
		t.Error("the caller's annotation map was modified in place")
	}
	if slice.Annotations[v1.EndpointsLastChangeTriggerTime] == "" || len(slice.Endpoints) != 1 {
		t.Errorf("slice lost what the proxier reads: %+v", slice)
	}
	if node.Status.Images != nil || len(node.Status.Addresses) != 1 || node.Labels[v1.LabelTopologyZone] != "z" {
		t.Errorf("node = %+v, want images dropped, addresses and labels kept", node)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/svc", Obj: makeService("svc")}
	if got, err := trimObject(tomb); err != nil || got != tomb {
		t.Errorf("tombstone: got %v, %v; want it unchanged", got, err)
	}
}
