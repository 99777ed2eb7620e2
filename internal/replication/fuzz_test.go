package replication

import (
	"testing"
	"time"
)

// FuzzParseCommand: any command text parses or fails without panicking, and a parsed
// START_REPLICATION's LSN round-trips through PostgreSQL's text form.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		"IDENTIFY_SYSTEM", "SHOW wal_segment_size", "CREATE_REPLICATION_SLOT \"s\" PHYSICAL RESERVE_WAL",
		"CREATE_REPLICATION_SLOT s TEMPORARY PHYSICAL (RESERVE_WAL true, X)", "READ_REPLICATION_SLOT s",
		"START_REPLICATION SLOT s PHYSICAL 1/2 TIMELINE 1", "START_REPLICATION 0/0;", "DROP_REPLICATION_SLOT s WAIT",
		"\"\"\"", "START_REPLICATION PHYSICAL FFFFFFFF/FFFFFFFF",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCommand(s)
		if err != nil {
			return
		}
		if c.Kind == StartReplication {
			back, err := ParseLSN(FormatLSN(c.LSN))
			if err != nil || back != c.LSN {
				t.Fatalf("LSN %X does not round-trip: %v", uint64(c.LSN), err)
			}
		}
	})
}

// FuzzDecodeFeedback: any CopyData a client sends during streaming decodes or fails
// without panicking; a decoded status update encodes back to the same bytes.
func FuzzDecodeFeedback(f *testing.F) {
	f.Add(EncodeStatusUpdate(StatusUpdate{Write: 10, Flush: 9, Apply: 8, Time: time.Unix(1700000000, 0), ReplyRequested: true}))
	f.Add(append([]byte{'h'}, make([]byte, 16)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fb, err := DecodeFeedback(b)
		if err != nil || fb.Status == nil {
			return
		}
		if got := EncodeStatusUpdate(*fb.Status); string(got) != string(b) {
			t.Fatalf("status update %x re-encodes as %x", b, got)
		}
	})
}

// FuzzDecodeServerMessage: any CopyData a primary sends decodes or fails without
// panicking (the standby side's decoder).
func FuzzDecodeServerMessage(f *testing.F) {
	f.Add(appendXLogData(nil, 1, 2, time.Unix(1700000000, 0), []byte("wal")))
	f.Add(encodeKeepalive(5, time.Unix(1700000000, 0), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeServerMessage(b)
		if err != nil {
			return
		}
		if !m.Keepalive && len(m.Data) != len(b)-25 {
			t.Fatalf("XLogData of %d bytes carries %d WAL bytes", len(b), len(m.Data))
		}
	})
}
