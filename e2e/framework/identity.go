package framework

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// The daemon's identity as deployed by deploy/serviceaccount.yaml.
const (
	DaemonSANamespace = "kube-system"
	DaemonSAName      = "switchyard"
)

// ServiceAccountKubeconfig writes to path a kubeconfig for the given
// ServiceAccount, with a token from the TokenRequest API valid for ttl. The
// daemon then runs with exactly the RBAC a DaemonSet pod would have.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, ns, name, path string, ttl time.Duration) error {
	secs := int64(ttl / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for serviceaccount %s/%s: %w", ns, name, err)
	}
	ca, err := caData(c.Config)
	if err != nil {
		return err
	}
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, name)
	cfg := TokenKubeconfig(c.Config.Host, ca, user, tok.Status.Token)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
