package e2e

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestSlowLinkPacesTheServersBytesAndPassesTheClientsUnpaced runs without the dev cluster
// (go test -run TestSlowLink ./test/e2e/): a server that echoes what it reads behind the
// relay at 2 MB/s; 1 MiB sent by the client reaches the server at once and comes back no
// faster than the rate allows, intact.
func TestSlowLinkPacesTheServersBytesAndPassesTheClientsUnpaced(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	received := make(chan time.Time, 1)
	const size = 1 << 20
	go func() {
		c, err := srv.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		buf := make([]byte, size)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		received <- time.Now()
		_, _ = c.Write(buf)
	}()

	link, err := newSlowLink("127.0.0.1", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer link.close()
	const rate = 2 << 20
	link.setRate(rate)
	c, err := net.Dial("tcp", link.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	sent := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	start := time.Now()
	go func() { _, _ = c.Write(sent) }()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the echo through the link: %v", err)
	}
	back := time.Since(start)
	if !bytes.Equal(got, sent) {
		t.Fatal("the echo through the link differs from what was sent")
	}
	toServer := (<-received).Sub(start)
	// The first 64 KiB chunk passes at once, the rest at the rate.
	if floor := time.Duration(float64(size-64<<10) / rate * float64(time.Second)); back < floor {
		t.Errorf("1 MiB came back through the link in %v, faster than %d bytes/s allows (%v)", back, rate, floor)
	}
	if toServer > back/2 {
		t.Errorf("the client's 1 MiB took %v to reach the server, against %v for the paced way back: the client's way is paced too", toServer, back)
	}
	link.close() // its goroutines done, so its count final
	if n := link.sent.Load(); n != size {
		t.Errorf("the link counted %d bytes toward the client, want %d", n, size)
	}
}
