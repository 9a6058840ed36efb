package kubeapi

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeEvent is an Event about the node, as kube-proxy records its own
// (Node reference with the node name as UID, in the default namespace,
// action "StartKubeProxy"), reported by controller.
func NodeEvent(node, controller, eventType, reason, action, note string, now time.Time) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", node, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: controller,
		ReportingInstance:   controller + "-" + node,
		Action:              action,
		Reason:              reason,
		Regarding:           v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node), APIVersion: "v1"},
		Note:                note,
		Type:                eventType,
	}
}
