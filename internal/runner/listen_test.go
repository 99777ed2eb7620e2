package runner

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func TestControlServerListensOnIPv6AndIPv4AddressesInBrackets(t *testing.T) {
	// The pod passes --listen=[$(POD_IP)]:8443, which must work for either family.
	for _, addr := range []string{"[::1]:0", "[127.0.0.1]:0"} {
		t.Run(addr, func(t *testing.T) {
			bound, stop, err := serve(addr, http.HandlerFunc(healthz), serverOptions{}, t.Logf)
			if err != nil {
				t.Fatalf("listen %s: %v", addr, err)
			}
			defer stop()
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + bound.String() + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /healthz on %s: HTTP %d", bound, resp.StatusCode)
			}
		})
	}
}

func TestConnectionLimitHoldsFurtherConnectionsUntilOneCloses(t *testing.T) {
	const limit = 3
	bound, stop, err := serve("127.0.0.1:0", http.HandlerFunc(healthz), serverOptions{maxConns: limit}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// limit idle connections: what a flood holds open (no request sent).
	var idle []net.Conn
	for range limit {
		c, err := net.Dial("tcp", bound.String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		idle = append(idle, c)
	}
	time.Sleep(100 * time.Millisecond)            // let the server accept them
	extra, err := net.Dial("tcp", bound.String()) // the kernel's backlog takes it
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = extra.Close() }()
	if _, err := fmt.Fprintf(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answer := make(chan string, 1)
	go func() { b, _ := io.ReadAll(extra); answer <- string(b) }()
	select {
	case a := <-answer:
		t.Fatalf("connection %d was served while %d were open: %q", limit+1, limit, a)
	case <-time.After(500 * time.Millisecond):
	}
	_ = idle[0].Close()
	select {
	case a := <-answer:
		if !strings.Contains(a, "200 OK") {
			t.Fatalf("after a connection closed, the waiting one got %q", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not served after one closed")
	}
}

func TestControlPortServesHTTPSAndMetricsMoveToTheirOwnPlainPort(t *testing.T) {
	cert, err := runnerwire.RunCertificate("tok")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	control, metrics := newHandlers(newTestState(t), []byte("tok"), false)
	cb, stopControl, err := serve("127.0.0.1:0", control,
		serverOptions{tls: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}, maxConns: 4}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stopControl()
	mb, stopMetrics, err := serve("127.0.0.1:0", metrics, serverOptions{maxConns: 4}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer stopMetrics()
	get := func(hc *http.Client, url string) int {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	pinned := runnerwire.PinnedClient(cert.DER, 5*time.Second)
	if code := get(pinned, "https://"+cb.String()+"/progress"); code != http.StatusOK {
		t.Errorf("HTTPS /progress with the pinned certificate: HTTP %d", code)
	}
	if code := get(pinned, "https://"+cb.String()+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics is still on the control port: HTTP %d", code)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if code := get(plain, "http://"+mb.String()+"/metrics"); code != http.StatusOK {
		t.Errorf("plain /metrics on the metrics port: HTTP %d", code)
	}
	if code := get(plain, "http://"+mb.String()+"/progress"); code != http.StatusNotFound {
		t.Errorf("the metrics port serves /progress: HTTP %d", code)
	}
}
