package main

import (
	"os"
	"path/filepath"
	"testing"
)

// testKubeconfig names an API server nobody dials: restConfig only reads it.
const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
users:
- name: u
  user:
    token: t
`

// The profiles show the manager's memory (Secrets it has read among it): only a loopback
// address may serve them.
func TestPprofServesOnlyOnALoopbackAddress(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:6060", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{":6060", false},
		{"0.0.0.0:6060", false},
		{"10.0.0.1:6060", false},
		{"127.0.0.1", false},
	} {
		o, err := parseFlags([]string{"--pprof-bind-address=" + c.addr})
		if (err == nil) != c.ok {
			t.Errorf("--pprof-bind-address=%q: error %v, want accepted %v", c.addr, err, c.ok)
		}
		if err == nil && o.pprofAddr != c.addr {
			t.Errorf("--pprof-bind-address=%q read as %q", c.addr, o.pprofAddr)
		}
	}
}

// The manager's client has no client-side rate limit unless one is asked for, and a limit is
// read as written: client-go would take a QPS of 0 for its own 5, and a burst below the rate
// would never let the rate be reached.
func TestTheClientHasNoRateLimitUnlessOneIsAsked(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	for _, c := range []struct {
		args       []string
		ok         bool
		qps        float64
		burst      int
		whyRefused string
	}{
		{nil, true, -1, 0, ""},
		{[]string{"--kube-api-qps=100"}, true, 100, 200, ""},
		{[]string{"--kube-api-qps=0.5"}, true, 0.5, 1, ""},
		{[]string{"--kube-api-qps=100", "--kube-api-burst=150"}, true, 100, 150, ""},
		{[]string{"--kube-api-qps=0"}, false, 0, 0, "0 would be client-go's 5 QPS"},
		{[]string{"--kube-api-qps=-2"}, false, 0, 0, "only -1 means no limit"},
		{[]string{"--kube-api-qps=100", "--kube-api-burst=50"}, false, 0, 0, "a burst below the rate"},
		{[]string{"--kube-api-burst=50"}, false, 0, 0, "a burst without a rate"},
	} {
		o, err := parseFlags(c.args)
		if (err == nil) != c.ok {
			t.Errorf("%v: error %v, want accepted %v (%s)", c.args, err, c.ok, c.whyRefused)
			continue
		}
		if err != nil {
			continue
		}
		if o.kubeAPIQPS != c.qps || o.kubeAPIBurst != c.burst {
			t.Errorf("%v: read as QPS %g, burst %d; want %g, %d", c.args, o.kubeAPIQPS, o.kubeAPIBurst, c.qps, c.burst)
		}
		cfg, err := restConfig(o)
		if err != nil {
			t.Fatal(err)
		}
		if float64(cfg.QPS) != c.qps || cfg.Burst != c.burst {
			t.Errorf("%v: the client's configuration has QPS %g, burst %d; want %g, %d", c.args, cfg.QPS, cfg.Burst, c.qps, c.burst)
		}
	}
}
