package main

import "testing"

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
