package runnerwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveAt serves h over HTTPS with cert on a free loopback address at ControlPort and
// returns its IP.
func serveAt(t *testing.T, h http.Handler, cert Certificate) string {
	t.Helper()
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		ip := fmt.Sprintf("127.0.%d.%d", 100+rand.IntN(100), 2+rand.IntN(250))
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(ControlPort)))
		if err != nil {
			continue
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
		srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ip
	}
	t.Fatal("no free loopback address for the runner port")
	return ""
}

func mustCertificate(t *testing.T, token string) Certificate {
	t.Helper()
	c, err := RunCertificate(token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFetchProgressDecodesASnapshotAndNamesThePodOnAnError(t *testing.T) {
	cert := mustCertificate(t, "token-of-run-1")
	golden, err := os.ReadFile(filepath.Join("testdata", "progress.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"golden snapshot", http.StatusOK, string(golden), ""},
		{"server error", http.StatusInternalServerError, "boom", "HTTP 500"},
		{"not JSON", http.StatusOK, "<html>", "decode progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip := serveAt(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/progress" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}), cert)
			p, err := FetchProgress(context.Background(), PinnedClient(cert.DER, 5*time.Second), ip)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), ip) {
					t.Fatalf("err = %v, want it to mention %q and %s", err, tc.wantErr, ip)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Phase == "" {
				t.Fatalf("decoded snapshot has no phase: %+v", p)
			}
		})
	}
}

func TestRunCertificateIsTheSameForTheSameTokenAndDiffersAcrossRuns(t *testing.T) {
	a, b, other := mustCertificate(t, "token-a"), mustCertificate(t, "token-a"), mustCertificate(t, "token-b")
	if string(a.DER) != string(b.DER) || string(a.KeyPEM) != string(b.KeyPEM) {
		t.Error("two certificates made from one token differ: the manager could not pin what it made before a restart")
	}
	if string(a.DER) == string(other.DER) || string(a.KeyPEM) == string(other.KeyPEM) {
		t.Error("two runs share a certificate")
	}
	if _, err := RunCertificate(""); err == nil {
		t.Error("a certificate was made from an empty token")
	}
}

func TestPinnedClientAcceptsOnlyTheRunsCertificate(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "progress.json"))
	if err != nil {
		t.Fatal(err)
	}
	served := mustCertificate(t, "token-of-the-pod")
	ip := serveAt(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(golden) }), served)
	if _, err := FetchProgress(context.Background(), PinnedClient(served.DER, 5*time.Second), ip); err != nil {
		t.Fatalf("the pinned certificate was refused: %v", err)
	}
	// A pod with another run's certificate (a reused pod IP, an impostor) is refused before
	// any request, so no token would be sent to it.
	other := mustCertificate(t, "token-of-another-run")
	_, err = FetchProgress(context.Background(), PinnedClient(other.DER, 5*time.Second), ip)
	if !errors.Is(err, ErrCertificateMismatch) {
		t.Fatalf("a runner with another certificate was accepted or failed otherwise: %v", err)
	}
	// Plain HTTP to the control port gets nothing either.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(ip, fmt.Sprint(ControlPort)) + "/progress")
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the control port answered plain HTTP")
		}
	}
}
