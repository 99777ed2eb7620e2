package runnerwire

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
)

// The ports of a runner pod.
const (
	// ControlPort serves /progress, /healthz and PUT /throttle over HTTPS (see tls.go).
	ControlPort = 8443
	// MetricsPort serves /metrics and /healthz over plain HTTP, for monitoring to scrape.
	MetricsPort = 9090
)

// MaxProgressBytes bounds what a client reads from a runner's /progress.
const MaxProgressBytes = 1 << 20

// URL is the address of a control endpoint (path starting with "/") on a pod IP, IPv4 or
// IPv6. It is HTTPS: dial it with PinnedClient.
func URL(podIP, path string) string {
	return "https://" + net.JoinHostPort(podIP, strconv.Itoa(ControlPort)) + path
}

// MetricsURL is the address of the plain-HTTP /metrics endpoint on a pod IP.
func MetricsURL(podIP string) string {
	return "http://" + net.JoinHostPort(podIP, strconv.Itoa(MetricsPort)) + "/metrics"
}

// FetchProgress reads one /progress snapshot from the runner at podIP with hc, a
// PinnedClient (bound its time with ctx or the client's Timeout). A status other than 200 or
// a body that is not a Progress is an error naming the pod IP.
func FetchProgress(ctx context.Context, hc *http.Client, podIP string) (*Progress, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, URL(podIP, "/progress"), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get progress from %s: %w", podIP, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get progress from %s: HTTP %d", podIP, resp.StatusCode)
	}
	var p Progress
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxProgressBytes)).Decode(&p); err != nil {
		return nil, fmt.Errorf("decode progress from %s: %w", podIP, err)
	}
	return &p, nil
}
