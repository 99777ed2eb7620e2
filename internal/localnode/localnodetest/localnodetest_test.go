package localnodetest

import (
	"net"
	"net/netip"
	"testing"
)

func TestAddressIsANonLoopbackAddressATestServerCanListenOn(t *testing.T) {
	ip := Address(t)
	if a := netip.MustParseAddr(ip); a.IsLoopback() {
		t.Fatalf("Address gave loopback %s", ip)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("connect to %s: %v", l.Addr(), err)
	}
	_ = c.Close()
	_ = l.Close()
}
