package runnerwire

import (
	"context"
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

// serveAt serves h on a free loopback address at Port and returns its IP.
func serveAt(t *testing.T, h http.Handler) string {
	t.Helper()
	for range 20 {
		ip := fmt.Sprintf("127.0.%d.%d", 100+rand.IntN(100), 2+rand.IntN(250))
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(Port)))
		if err != nil {
			continue
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ip
	}
	t.Fatal("no free loopback address for the runner port")
	return ""
}

func TestFetchProgressDecodesASnapshotAndNamesThePodOnAnError(t *testing.T) {
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
			}))
			p, err := FetchProgress(context.Background(), &http.Client{Timeout: 5 * time.Second}, ip)
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
