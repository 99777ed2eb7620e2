// Package localnodetest gives tests an address of the local node's pod range for a server
// they start themselves beside the dev cluster, so that an EndpointSlice (which the API server
// refuses with a loopback address) can point at it.
package localnodetest

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/localnode"
)

// Address holds one address of the host's pod range (see localnode.HoldAddress) until the
// test ends, and returns it. Without the right to route the range (not root) it fails the
// test: such an address could not be published in an EndpointSlice.
func Address(t testing.TB) string {
	t.Helper()
	h, err := localnode.HoldAddress()
	if err != nil {
		t.Fatalf("hold a pod address: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Release(); err != nil {
			t.Errorf("release pod address %s: %v", h.IP, err)
		}
	})
	if h.Loopback {
		t.Fatalf("the pod range cannot be routed here (needs root or CAP_NET_ADMIN on Linux): got loopback %s, which no EndpointSlice can carry", h.IP)
	}
	return h.IP
}
