package framework

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// Writing objects straight into the apiserver's etcd is for seeding tens of
// thousands of Services: kube-apiserver v1.37's ClusterIP allocator counts
// every IPAddress at each allocation and release, so creating (and deleting)
// n Services through the API costs O(n²). The apiserver itself is unchanged
// and serves what it finds in etcd: its watch cache picks the keys up
// through its etcd watch.

// EtcdEndpointEnv names the etcd client URL behind a reused control plane
// (see KubeconfigEnv), e.g. http://127.0.0.1:2379 for hack/local-up.sh's
// default; a control plane StartCluster starts knows its own.
const EtcdEndpointEnv = "SWITCHYARD_ETCD_ENDPOINT"

// etcdPrefix is kube-apiserver's default --etcd-prefix.
const etcdPrefix = "/registry"

// etcdWriters is how many writes are in flight at once.
const etcdWriters = 8

// StorageKey is the etcd key under which kube-apiserver v1.37 keeps obj
// (checked against a live apiserver's keys; Services are the one resource
// whose prefix is not its name).
func StorageKey(obj runtime.Object) (string, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return serviceKeyPrefix(o.Namespace) + o.Name, nil
	case *discoveryv1.EndpointSlice:
		return sliceKeyPrefix(o.Namespace) + o.Name, nil
	case *networkingv1.IPAddress:
		return ipAddressKeyPrefix + o.Name, nil
	}
	return "", fmt.Errorf("no etcd key known for %T", obj)
}

func serviceKeyPrefix(ns string) string { return etcdPrefix + "/services/specs/" + ns + "/" }
func sliceKeyPrefix(ns string) string   { return etcdPrefix + "/endpointslices/" + ns + "/" }

const ipAddressKeyPrefix = etcdPrefix + "/ipaddresses/"

// storageSerializer writes what the apiserver stores: protobuf inside the
// "k8s\x00" envelope (runtime.Unknown).
var storageSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// EncodeForStorage encodes obj as kube-apiserver stores it, in the group
// version its type belongs to (v1, discovery.k8s.io/v1, networking.k8s.io/v1
// are those resources' storage versions in v1.37).
func EncodeForStorage(obj runtime.Object) ([]byte, error) {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	enc := scheme.Codecs.EncoderForVersion(storageSerializer, gvks[0].GroupVersion())
	return runtime.Encode(enc, obj)
}

// DecodeStored decodes a value EncodeForStorage (or the apiserver) wrote.
func DecodeStored(data []byte) (runtime.Object, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	return obj, err
}

// Etcd writes and deletes API objects straight in a kube-apiserver's etcd.
type Etcd struct {
	cli *clientv3.Client
}

// DialEtcd connects to the etcd at endpoint (an http:// client URL).
func DialEtcd(endpoint string) (*Etcd, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", endpoint, err)
	}
	return &Etcd{cli: cli}, nil
}

// Close closes the connection.
func (e *Etcd) Close() error { return e.cli.Close() }

// Create writes objs, each in a transaction of its own that writes nothing
// if its key exists, etcdWriters at a time.
//
// One object a revision, as the apiserver writes them: its watch cache
// resumes a watch that it cut (a slow watcher) after the last revision the
// watcher received, so the rest of a revision shared by several objects
// would be lost to it. With 64 Services a transaction, 11 of one
// transaction never reached the apiserver's own Service informer.
func (e *Etcd) Create(ctx context.Context, objs []runtime.Object) error {
	return Parallel(len(objs), etcdWriters, func(i int) error { return e.create(ctx, objs[i]) })
}

func (e *Etcd) create(ctx context.Context, obj runtime.Object) error {
	key, err := StorageKey(obj)
	if err != nil {
		return err
	}
	val, err := EncodeForStorage(obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	resp, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcd: %s already exists", key)
	}
	return nil
}

// Keys lists the keys under prefix.
func (e *Etcd) Keys(ctx context.Context, prefix string) ([]string, error) {
	resp, err := e.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key)
	}
	return keys, nil
}

// Delete deletes keys one by one (see Create: one revision each),
// etcdWriters at a time.
func (e *Etcd) Delete(ctx context.Context, keys []string) error {
	return Parallel(len(keys), etcdWriters, func(i int) error {
		_, err := e.cli.Delete(ctx, keys[i])
		return err
	})
}

// serviceIPAddressKeys maps the name of each Service of ns that an
// IPAddress names as parent to that IPAddress's keys.
func (e *Etcd) serviceIPAddressKeys(ctx context.Context, ns string) (map[string][]string, error) {
	resp, err := e.cli.Get(ctx, ipAddressKeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	keys := map[string][]string{}
	for _, kv := range resp.Kvs {
		obj, err := DecodeStored(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		if ip, ok := obj.(*networkingv1.IPAddress); ok && ownedByServiceIn(ip, ns) {
			name := ip.Spec.ParentRef.Name
			keys[name] = append(keys[name], string(kv.Key))
		}
	}
	return keys, nil
}

func ownedByServiceIn(ip *networkingv1.IPAddress, ns string) bool {
	ref := ip.Spec.ParentRef
	return ref != nil && ref.Group == "" && ref.Resource == "services" && ref.Namespace == ns
}

// Parallel runs fn(0..n-1) on up to workers goroutines and returns the
// first error; after one, no further call starts.
func Parallel(n, workers int, fn func(i int) error) error {
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(workers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i) })
	}
	return g.Wait()
}

// Update reads the object stored at key, lets change modify it and writes
// it back in a transaction that fails if anyone wrote the key meanwhile:
// what another apiserver sharing the etcd would do. The apiserver derives
// the object's resourceVersion from the write's revision.
func (e *Etcd) Update(ctx context.Context, key string, change func(runtime.Object) error) error {
	resp, err := e.cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if len(resp.Kvs) != 1 {
		return fmt.Errorf("etcd: %s not found", key)
	}
	kv := resp.Kvs[0]
	obj, err := DecodeStored(kv.Value)
	if err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	if err := change(obj); err != nil {
		return fmt.Errorf("change %s: %w", key, err)
	}
	val, err := EncodeForStorage(obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	txn, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if !txn.Succeeded {
		return fmt.Errorf("etcd: %s changed while it was updated", key)
	}
	return nil
}
