package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// slowLink is a TCP relay in the test process that passes at most a set number of bytes a
// second from the server it dials to the client that connected (a synchronous standby's
// WAL stream), and everything the other way unpaced (the standby's status updates): a
// standby across a slow link, as a remote synchronous standby is.
type slowLink struct {
	ln       net.Listener
	upstream string
	rate     atomic.Int64 // bytes a second toward the client; 0 passes them unpaced
	sent     atomic.Int64 // bytes passed toward the client, in all
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// newSlowLink listens on listenHost (an address of this machine the standby can reach) and
// relays each connection to upstream, unpaced until setRate.
func newSlowLink(listenHost, upstream string) (*slowLink, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(listenHost, "0"))
	if err != nil {
		return nil, fmt.Errorf("listening for the slow link to %s on %s: %w", upstream, listenHost, err)
	}
	l := &slowLink{ln: ln, upstream: upstream}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// addr is where the standby connects.
func (l *slowLink) addr() string { return l.ln.Addr().String() }

// setRate paces the bytes toward the client at bytesPerSecond from now on (0: unpaced).
func (l *slowLink) setRate(bytesPerSecond int64) { l.rate.Store(bytesPerSecond) }

// close stops listening, ends every relayed connection and waits for the relay's goroutines.
func (l *slowLink) close() {
	_ = l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *slowLink) accept() {
	defer l.wg.Done()
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.upstream)
		if err != nil {
			_ = down.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, down, up)
		l.mu.Unlock()
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			_, _ = io.Copy(up, down)
			_ = up.Close()
		}()
		go func() {
			defer l.wg.Done()
			_ = l.pace(down, up)
			_ = down.Close()
		}()
	}
}

// pace copies src to dst in chunks of at most 64 KiB, each sent no sooner than the rate
// allows after the ones before (a token bucket of one chunk): the bytes the link cannot
// pass yet wait in the sockets' buffers and, behind them, in the server's WAL.
func (l *slowLink) pace(dst, src net.Conn) error {
	buf := make([]byte, 64<<10)
	next := time.Now()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if r := l.rate.Load(); r > 0 {
				now := time.Now()
				if next.Before(now) {
					next = now
				}
				next = next.Add(time.Duration(float64(n) / float64(r) * float64(time.Second)))
				time.Sleep(time.Until(next))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return fmt.Errorf("relaying %d bytes to the standby: %w", n, werr)
			}
			l.sent.Add(int64(n))
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading from %s: %w", l.upstream, err)
		}
	}
}
