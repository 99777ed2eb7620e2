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

// Port is the port a runner pod serves /progress, /metrics, /healthz and /throttle on.
const Port = 8080

// MaxProgressBytes bounds what a client reads from a runner's /progress.
const MaxProgressBytes = 1 << 20

// URL is the address of a runner endpoint (path starting with "/") on a pod IP.
func URL(podIP, path string) string {
	return "http://" + net.JoinHostPort(podIP, strconv.Itoa(Port)) + path
}

// FetchProgress reads one /progress snapshot from the runner at podIP with hc (bound its
// time with ctx or the client's Timeout). A status other than 200 or a body that is not a
// Progress is an error naming the pod IP.
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
