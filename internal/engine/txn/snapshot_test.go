package txn

import (
	"bytes"
	"testing"
)

func TestSnapshotSeesWhatCommittedBeforeItAndNothingRunningOrLater(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), 0)
	committedBefore := m.Begin()
	committedBefore.MarkWritten()
	if err := m.Commit(committedBefore, nil); err != nil {
		t.Fatal(err)
	}
	abortedBefore := m.Begin()
	abortedBefore.MarkWritten()
	if err := m.Abort(abortedBefore, nil); err != nil {
		t.Fatal(err)
	}
	runningAtSnapshotThenCommitted := m.Begin()
	runningAtSnapshot := m.Begin()

	reader := m.Begin()
	snap := reader.Snapshot()

	if err := m.Commit(runningAtSnapshotThenCommitted, nil); err != nil {
		t.Fatal(err)
	}
	startedAfter := m.Begin()
	if err := m.Commit(startedAfter, nil); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		xid  XID
		want bool
	}{
		{"own transaction", reader.XID(), true},
		{"committed before the snapshot", committedBefore.XID(), true},
		{"aborted", abortedBefore.XID(), false},
		{"in progress at snapshot, committed later", runningAtSnapshotThenCommitted.XID(), false},
		{"still in progress", runningAtSnapshot.XID(), false},
		{"started and committed after the snapshot", startedAfter.XID(), false},
		{"frozen", FrozenXID, true},
		{"bootstrap", BootstrapXID, true},
		{"invalid", InvalidXID, false},
		{"never assigned", m.NextXID() + 10, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := snap.XidVisible(m, c.xid); got != c.want {
				t.Errorf("XidVisible(%d) = %v, want %v", c.xid, got, c.want)
			}
		})
	}
	// A new snapshot sees the late committer.
	later := m.Begin().Snapshot()
	if !later.XidVisible(m, runningAtSnapshotThenCommitted.XID()) {
		t.Error("a snapshot taken after the commit does not see it")
	}
	if later.XidVisible(m, runningAtSnapshot.XID()) {
		t.Error("a later snapshot sees a transaction that is still running")
	}
}

func TestClogEncodeDecodeRoundTrip(t *testing.T) {
	data := []byte{0x01 | 0x02<<2 | 0x01<<6, 0x02}
	b := EncodeClog(7, data)
	next, got, err := DecodeClog(b)
	if err != nil {
		t.Fatal(err)
	}
	if next != 7 || !bytes.Equal(got, data) {
		t.Fatalf("decoded next %d data %x, want 7 %x", next, got, data)
	}
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x40
		if _, _, err := DecodeClog(bad); err == nil {
			t.Errorf("flipping a bit of byte %d went undetected", i)
		}
	}
	if _, _, err := DecodeClog(b[:len(b)-1]); err == nil {
		t.Error("truncated clog decoded without error")
	}
}

func FuzzDecodeClog(f *testing.F) {
	f.Add(EncodeClog(3, nil))
	f.Add(EncodeClog(9, []byte{0x15, 0x26, 0x01}))
	f.Add([]byte("VCLG"))
	f.Fuzz(func(t *testing.T, b []byte) {
		next, data, err := DecodeClog(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		if again := EncodeClog(next, data); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding changed the bytes:\n%x\n%x", b, again)
		}
	})
}
