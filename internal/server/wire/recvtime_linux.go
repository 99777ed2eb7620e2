package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampedConn is a TCP connection whose reads record the kernel's receive time.
type stampedConn struct {
	net.Conn
	raw  syscall.RawConn
	oob  []byte
	last time.Time // receive time of the bytes the last Read returned; zero if none came
	// kernel: last is the kernel's time. The kernel turns its receive timestamps on for
	// the whole machine with a delay after the first socket asks (a deferred static key),
	// so the first segments after that can come without one: they are timed when read.
	kernel bool
}

// newStampedConn sets SO_TIMESTAMPNS on nc and returns it wrapped; an error when nc is not
// a socket on which the option can be set (the caller then times statements from their
// start).
func newStampedConn(nc net.Conn) (*stampedConn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("receive timestamps: %T is not a socket", nc)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("receive timestamps: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return nil, fmt.Errorf("receive timestamps: %w", err)
	}
	if serr != nil {
		return nil, fmt.Errorf("receive timestamps: setsockopt SO_TIMESTAMPNS: %w", serr)
	}
	return &stampedConn{Conn: nc, raw: raw, oob: make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))}, nil
}

// Read reads through recvmsg, honouring the connection's deadlines (the runtime's poller
// waits as it does for an ordinary Read), and records the receive time of what it read.
func (c *stampedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n, oobn int
	var rerr error
	if err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, c.oob, 0)
			if !errors.Is(rerr, unix.EINTR) {
				return !errors.Is(rerr, unix.EAGAIN)
			}
		}
	}); err != nil {
		return 0, err // a deadline or a closed connection, as net reports them
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("recvmsg", rerr)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.last = receiveTime(c.oob[:oobn])
	c.kernel = !c.last.IsZero()
	if !c.kernel {
		c.last = time.Now() // no timestamp came with these bytes: they are at least this old
	}
	return n, nil
}

// receiveTime is the SCM_TIMESTAMPNS time in a recvmsg's control data; zero when there is
// none or the control data cannot be parsed.
func receiveTime(oob []byte) time.Time {
	// One message at a time: ParseSocketControlMessage would allocate a slice of them on
	// every read.
	for len(oob) > 0 {
		if len(oob) < unix.CmsgLen(0) {
			return time.Time{} // ParseOneSocketControlMessage would read a header past the end
		}
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return time.Time{}
		}
		oob = rest
		if h.Level != unix.SOL_SOCKET || h.Type != unix.SCM_TIMESTAMPNS {
			continue
		}
		var ts unix.Timespec
		size := int(unsafe.Sizeof(ts))
		if len(data) < size {
			return time.Time{}
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts)), size), data)
		return time.Unix(ts.Unix())
	}
	return time.Time{}
}
