package wire

import (
	"encoding/binary"
	"io"
	"time"
)

// Receive times: a statement's foreground latency starts when its message reached the
// server's kernel, not when the session got round to reading it. Under CPU contention (a
// VACUUM beside the load on few cores) a message can sit in the socket's receive queue for
// milliseconds while the session's thread waits for a CPU; a clock started by the session
// never sees that wait, and a client does.
//
// Linux TCP attaches the receive time of the last segment a recvmsg read (SCM_TIMESTAMPNS,
// CLOCK_REALTIME) when the socket has SO_TIMESTAMPNS set. stampedConn reads through recvmsg
// and keeps that time; framer sits between the connection (or TLS above it) and pgproto3's
// reader, hands pgproto3 one message at a time, and knows which read fetched each
// message's first byte. Where the option cannot be set (not TCP, not Linux), neither layer
// is installed and statements are timed from their start as before.
//
// The time is the last segment's of the read that fetched a message's first byte: a message
// that arrived in several segments counts from the last one that read returned, so the
// figure errs short, never long. Under TLS, a read of the TLS connection may return a record
// that an earlier read of the socket fetched; the message then gets the later read's time,
// again erring short.

// framerBufBytes is the framer's buffer: a read takes up to this much of the socket.
const framerBufBytes = 8 << 10

// framer hands its reader (pgproto3's) the bytes of one frontend message at a time, so that
// when a message has been received, at is its first byte's receive time. It parses only
// each message's header (its length); everything else is pgproto3's.
type framer struct {
	r     io.Reader
	stamp *stampedConn // below r, or r itself
	buf   []byte
	rp    int
	wp    int
	segs  []segment // receive times of buf[rp:wp], in order
	typed bool      // past the startup packet: messages start with a type byte
	left  int64     // bytes of the current message not yet handed out
	at    time.Time // receive time of the current message's first byte
}

// segment is one read's bytes in the buffer: up to end, received at at.
type segment struct {
	end int
	at  time.Time
}

func newFramer(r io.Reader, stamp *stampedConn) *framer {
	return &framer{r: r, stamp: stamp, buf: make([]byte, framerBufBytes)}
}

// buffered is how many bytes the framer holds past the messages it handed out.
func (f *framer) buffered() int { return f.wp - f.rp }

// received is the receive time of the first byte of the message last handed out (started).
func (f *framer) received() time.Time { return f.at }

// Read hands out at most the rest of the current message, starting the next one when the
// current one is done.
func (f *framer) Read(p []byte) (int, error) {
	if f.left == 0 {
		if err := f.start(); err != nil {
			return 0, err
		}
	}
	if f.rp == f.wp {
		if err := f.fill(); err != nil {
			return 0, err
		}
	}
	end := f.wp
	if f.left < int64(f.wp-f.rp) {
		end = f.rp + int(f.left)
	}
	n := copy(p, f.buf[f.rp:end])
	f.rp += n
	f.left -= int64(n)
	return n, nil
}

// start begins the next message: its header is buffered, its length and receive time known.
func (f *framer) start() error {
	hdr := 4
	if f.typed {
		hdr = 5
	}
	for f.wp-f.rp < hdr {
		if err := f.fill(); err != nil {
			if f.wp > f.rp {
				// A truncated header: hand out what there is and let pgproto3 see the end.
				f.left, f.at = int64(f.wp-f.rp), f.timeAt(f.rp)
				return nil
			}
			return err
		}
	}
	length := int64(binary.BigEndian.Uint32(f.buf[f.rp+hdr-4:]))
	total := length + int64(hdr-4)
	if length < 4 {
		total = int64(hdr) // invalid: pgproto3 rejects it after the header
	}
	f.left, f.at = total, f.timeAt(f.rp)
	return nil
}

// timeAt is the receive time of buf[i].
func (f *framer) timeAt(i int) time.Time {
	for _, s := range f.segs {
		if s.end > i {
			return s.at
		}
	}
	return time.Time{}
}

// fill reads once more from r into the buffer, compacting it first.
func (f *framer) fill() error {
	if f.rp == f.wp {
		f.rp, f.wp, f.segs = 0, 0, f.segs[:0]
	} else if f.wp == len(f.buf) {
		copy(f.buf, f.buf[f.rp:f.wp])
		kept := f.segs[:0]
		for _, s := range f.segs {
			if s.end > f.rp {
				kept = append(kept, segment{end: s.end - f.rp, at: s.at})
			}
		}
		f.segs, f.wp, f.rp = kept, f.wp-f.rp, 0
	}
	n, err := f.r.Read(f.buf[f.wp:])
	if n > 0 {
		f.wp += n
		f.segs = append(f.segs, segment{end: f.wp, at: f.stamp.last})
	}
	if n > 0 {
		return nil // an error comes back with the next read
	}
	return err // nil too: io.Reader allows 0, nil and the caller reads again
}
