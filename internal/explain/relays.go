package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
)

// RelayReader reads the userspace proxy's relay table from the daemon.
type RelayReader interface {
	RelayTable(ctx context.Context) (userspace.RelayTable, error)
}

// HTTPRelays reads the relay table the daemon serves on its metrics
// address (userspace.RelayTablePath), with a GET.
type HTTPRelays struct {
	// URL is the table's address.
	URL    string
	Client *http.Client
}

// NewHTTPRelays reads the table from the daemon whose
// --metrics-bind-address is bind: a wildcard host is reached on
// loopback.
func NewHTTPRelays(bind string) (*HTTPRelays, error) {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("--metrics-bind-address %q: %w", bind, err)
	}
	if a, err := netip.ParseAddr(host); host == "" || err == nil && a.IsUnspecified() {
		host = "127.0.0.1"
		if err == nil && a.Is6() {
			host = "::1"
		}
	}
	return &HTTPRelays{URL: "http://" + net.JoinHostPort(host, port) + userspace.RelayTablePath,
		// No proxy from the environment: the daemon is on this node.
		Client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}}, nil
}

// RelayTable implements RelayReader.
func (h *HTTPRelays) RelayTable(ctx context.Context) (userspace.RelayTable, error) {
	var t userspace.RelayTable
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		return t, err
	}
	resp, err := h.Client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // it repeats the URL
	}
	if err != nil {
		return t, fmt.Errorf("the daemon's relay table (GET %s): %w", h.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return t, fmt.Errorf("the daemon's relay table (GET %s): %s", h.URL, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return t, fmt.Errorf("the daemon's relay table (GET %s): %w", h.URL, err)
	}
	return t, nil
}
