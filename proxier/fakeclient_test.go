package proxier

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// selectorLog records the label and field selectors the informers asked
// for, per resource and verb ("services list" -> selector strings).
type selectorLog struct {
	mu   sync.Mutex
	seen map[string][]string
}

func (l *selectorLog) record(verb, resource string, opts metav1.ListOptions) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string][]string{}
	}
	k := resource + " " + verb
	l.seen[k] = append(l.seen[k], fmt.Sprintf("labels=%q fields=%q", opts.LabelSelector, opts.FieldSelector))
}

func (l *selectorLog) get(verb, resource string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen[resource+" "+verb]...)
}

// newSelectingClient returns a fake clientset that applies list and watch
// label selectors and metadata.name/metadata.namespace field selectors the
// way the apiserver does. The generated fake alone filters lists by label
// only and watches not at all, so without this a watch would deliver
// objects the proxier's selector excludes.
func newSelectingClient(objs ...runtime.Object) (*fake.Clientset, *selectorLog) {
	cs := fake.NewClientset(objs...)
	log := &selectorLog{}
	cs.PrependReactor("list", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		la, ok := action.(k8stesting.ListActionImpl)
		if !ok {
			return false, nil, nil
		}
		log.record("list", action.GetResource().Resource, la.ListOptions)
		handled, obj, err := k8stesting.ObjectReaction(cs.Tracker())(action)
		if err != nil || !handled {
			return handled, obj, err
		}
		match, err := selectorMatcher(la.ListOptions)
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return true, nil, err
		}
		var kept []runtime.Object
		for _, it := range items {
			if match(it) {
				kept = append(kept, it)
			}
		}
		return true, obj, meta.SetList(obj, kept)
	})
	cs.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		wa, ok := action.(k8stesting.WatchActionImpl)
		if !ok {
			return false, nil, nil
		}
		log.record("watch", action.GetResource().Resource, wa.ListOptions)
		match, err := selectorMatcher(wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		w, err := cs.Tracker().Watch(action.GetResource(), action.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			return e, e.Type == watch.Bookmark || e.Type == watch.Error || match(e.Object)
		}), nil
	})
	return cs, log
}

func selectorMatcher(opts metav1.ListOptions) (func(runtime.Object) bool, error) {
	ls, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", opts.LabelSelector, err)
	}
	fs, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return nil, fmt.Errorf("field selector %q: %w", opts.FieldSelector, err)
	}
	return func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		return ls.Matches(labels.Set(m.GetLabels())) &&
			fs.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
	}, nil
}
