package replication_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/replication"
)

func replConnect(t *testing.T, url string) *pgconn.PgConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestPglogreplStreamsWALAndTracksStandbyPositions drives the primary with pgx's pgconn
// and pglogrepl: IDENTIFY_SYSTEM, SHOW, a physical slot that survives a restart, streaming
// that carries the WAL bytes as they are on disk, keepalives, and the status updates the
// primary records per connection and in the slot.
func TestPglogreplStreamsWALAndTracksStandbyPositions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1, KeepaliveInterval: 100 * time.Millisecond})
	c := replConnect(t, pr.replURL("repl")+"&application_name=standby1")

	id, err := pglogrepl.IdentifySystem(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if id.SystemID != formatUint(pr.db.SystemID()) || id.Timeline != 1 || id.DBName != "" {
		t.Fatalf("IDENTIFY_SYSTEM = %+v, want system %d, timeline 1, no database", id, pr.db.SystemID())
	}
	if flushed := pr.db.WAL().FlushedLSN(); uint64(id.XLogPos) != uint64(flushed) {
		t.Fatalf("IDENTIFY_SYSTEM xlogpos %s, want the flushed end %s", id.XLogPos, replication.FormatLSN(flushed))
	}
	for name, want := range map[string]string{"wal_segment_size": "16MB", "data_directory_mode": "0700"} {
		res, err := c.Exec(ctx, "SHOW "+name).ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != want {
			t.Fatalf("SHOW %s = %v, %v; want %s", name, res, err, want)
		}
	}
	if _, err := pglogrepl.CreateReplicationSlot(ctx, c, "s1", "", pglogrepl.CreateReplicationSlotOptions{
		Mode: pglogrepl.PhysicalReplication, SnapshotAction: "RESERVE_WAL"}); err != nil {
		t.Fatal(err)
	}
	_, err = pglogrepl.CreateReplicationSlot(ctx, c, "s1", "", pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.PhysicalReplication})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42710" {
		t.Fatalf("second CREATE_REPLICATION_SLOT s1: %v, want 42710", err)
	}

	// The slot is durable: a restart of the primary keeps it and its position.
	sl, _ := pr.p.Slots().Get("s1")
	_ = c.Close(ctx)
	pr.stop()
	pr = openPrimary(t, pr.dir, replication.PrimaryConfig{MaxSlotWALKeepSize: -1, KeepaliveInterval: 100 * time.Millisecond})
	if got, ok := pr.p.Slots().Get("s1"); !ok || got.RestartLSN != sl.RestartLSN || got.RestartLSN == 0 {
		t.Fatalf("slot after restart %+v, %v; want restart LSN %s", got, ok, replication.FormatLSN(sl.RestartLSN))
	}
	c = replConnect(t, pr.replURL("repl")+"&application_name=standby1")
	write(t, pr.db, "t", 500, 200)
	end := pr.db.WAL().FlushedLSN()
	start := pglogrepl.LSN(sl.RestartLSN)
	if err := pglogrepl.StartReplication(ctx, c, "s1", start, pglogrepl.StartReplicationOptions{Mode: pglogrepl.PhysicalReplication, Timeline: 1}); err != nil {
		t.Fatal(err)
	}
	segment, err := os.ReadFile(filepath.Join(pr.dir, wal.WALDirName, wal.SegmentName(0, wal.DefaultSegmentSize)))
	if err != nil {
		t.Fatal(err)
	}
	pos, keepalives := start, 0
	for pos < pglogrepl.LSN(end) || keepalives == 0 {
		msg, err := c.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("receive at %s: %v", pos, err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			t.Fatalf("got %T during streaming", msg)
		}
		switch cd.Data[0] {
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			if x.WALStart != pos {
				t.Fatalf("XLogData at %s, want the next position %s", x.WALStart, pos)
			}
			if string(x.WALData) != string(segment[x.WALStart:int(x.WALStart)+len(x.WALData)]) {
				t.Fatalf("XLogData at %s differs from the segment file", x.WALStart)
			}
			pos += pglogrepl.LSN(len(x.WALData))
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			if k.ServerWALEnd < pos {
				t.Fatalf("keepalive WAL end %s before what was sent %s", k.ServerWALEnd, pos)
			}
			keepalives++
		}
	}
	// A stream that has reported nothing holds no vacuum back (the WAL lag bound's view).
	if _, n, _ := pr.p.SlowestReplay(); n != 0 {
		t.Fatalf("SlowestReplay counts %d standbys before any report, want 0", n)
	}
	_, _, reported := pr.p.SlowestReplay()
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, c, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos,
		WALFlushPosition: pos, WALApplyPosition: pos - 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reported:
	case <-time.After(10 * time.Second):
		t.Fatal("SlowestReplay's channel not closed 10 s after a status update")
	}
	if replayed, n, _ := pr.p.SlowestReplay(); n != 1 || replayed != wal.LSN(pos-1) {
		t.Fatalf("SlowestReplay = %s, %d standbys; want the reported replay %s, 1", replication.FormatLSN(replayed), n, pos-1)
	}
	_, _, left := pr.p.SlowestReplay()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss := pr.p.Standbys()
		if len(ss) == 1 && ss[0].Flush == wal.LSN(pos) {
			s := ss[0]
			if s.AppName != "standby1" || s.User != "repl" || s.Slot != "s1" || s.Sent != wal.LSN(pos) ||
				s.Write != wal.LSN(pos) || s.Replay != wal.LSN(pos-1) || s.State != "streaming" || s.FlushLag < 0 {
				t.Fatalf("standby %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standbys %+v, want one having flushed %s", ss, pos)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, _ := pr.p.Slots().Get("s1"); got.RestartLSN != wal.LSN(pos) {
		t.Fatalf("slot restart LSN %s, want the reported flush %s", replication.FormatLSN(got.RestartLSN), pos)
	}
	if _, err := pglogrepl.SendStandbyCopyDone(ctx, c); err != nil {
		t.Fatalf("CopyDone: %v", err)
	}
	// The connection takes commands again after the stream.
	if _, err := pglogrepl.IdentifySystem(ctx, c); err != nil {
		t.Fatalf("IDENTIFY_SYSTEM after the stream: %v", err)
	}
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("SlowestReplay's channel not closed 10 s after the stream ended")
	}
	if _, n, _ := pr.p.SlowestReplay(); n != 0 {
		t.Fatalf("SlowestReplay counts %d standbys after the stream ended, want 0", n)
	}
	if err := pglogrepl.DropReplicationSlot(ctx, c, "s1", pglogrepl.DropReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := pr.p.Slots().Get("s1"); ok {
		t.Fatal("slot s1 still there after DROP_REPLICATION_SLOT")
	}
}

func formatUint(v uint64) string { return fmtUint(v) }

// TestReplicationNeedsTheMarkerAndRefusesBadRequests: a user without the users file's
// replication marker is refused (42501); a start ahead of the WAL, an unknown timeline or
// slot, and an unknown command are errors the connection survives.
func TestReplicationNeedsTheMarkerAndRefusesBadRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1})
	_, err := pgconn.Connect(ctx, pr.replURL("plain"))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("replication connection of a user without the marker: %v, want 42501", err)
	}
	c := replConnect(t, pr.replURL("repl"))
	ahead := pglogrepl.LSN(pr.db.WAL().FlushedLSN() + 1<<20)
	cases := []struct {
		name, sql, code string
	}{
		{"start ahead of the flush position", "START_REPLICATION PHYSICAL " + ahead.String(), "XX000"},
		{"another timeline", "START_REPLICATION PHYSICAL 0/0 TIMELINE 2", "XX000"},
		{"unknown slot", "START_REPLICATION SLOT nope PHYSICAL 0/0", "42704"},
		{"logical slot", "CREATE_REPLICATION_SLOT l LOGICAL pgoutput", "42601"},
		{"not a replication command", "SELECT 1", "42601"},
		{"bad slot name", "CREATE_REPLICATION_SLOT \"Bad-Name\" PHYSICAL", "42602"},
	}
	for _, tc := range cases {
		_, err := c.Exec(ctx, tc.sql).ReadAll()
		if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
			t.Errorf("%s (%s): %v, want %s", tc.name, tc.sql, err, tc.code)
		}
	}
	if _, err := pglogrepl.IdentifySystem(ctx, c); err != nil {
		t.Fatalf("connection unusable after the errors: %v", err)
	}
}

// TestSlotPastKeepSizeIsInvalidatedAndWALIsRemoved: a slot keeps its WAL through a
// checkpoint while within its keep size; a slot that holds more WAL than
// --max-slot-wal-keep-size is invalidated (counted, logged), stops holding WAL (the next
// checkpoint removes the first segment) and refuses to stream (55000).
func TestSlotPastKeepSizeIsInvalidatedAndWALIsRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const seg = 1 << 20 // small segments: the test writes a few MiB, not tens
	pr := startPrimarySeg(t, replication.PrimaryConfig{MaxSlotWALKeepSize: 2 << 20}, seg)
	c := replConnect(t, pr.replURL("repl"))
	if _, err := pglogrepl.CreateReplicationSlot(ctx, c, "lagging", "", pglogrepl.CreateReplicationSlotOptions{
		Mode: pglogrepl.PhysicalReplication, SnapshotAction: "RESERVE_WAL"}); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(pr.dir, wal.WALDirName, wal.SegmentName(0, seg))
	write(t, pr.db, "t", 1500, 1000) // about 1.7 MiB: within the keep size
	if err := pr.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // housekeeping runs every 200 ms
	if sl, _ := pr.p.Slots().Get("lagging"); sl.Invalidated || pr.p.Invalidations() != 0 {
		t.Fatalf("slot invalidated within its keep size: %+v", sl)
	}
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("first segment gone while a valid slot holds it: %v", err)
	}
	write(t, pr.db, "t", 1500, 1000) // past the keep size
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The housekeeper marks the slot, then counts it: wait for both.
		if sl, _ := pr.p.Slots().Get("lagging"); sl.Invalidated && pr.p.Invalidations() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot past its keep size not invalidated and counted (invalidations %d)", pr.p.Invalidations())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := pr.p.Invalidations(); n != 1 {
		t.Fatalf("invalidations %d, want 1", n)
	}
	time.Sleep(300 * time.Millisecond)
	if err := pr.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("first segment %s still there after the slot's invalidation and a checkpoint (%v)", first, err)
	}
	err := pglogrepl.StartReplication(ctx, c, "lagging", 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.PhysicalReplication})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
		t.Fatalf("START_REPLICATION from an invalidated slot: %v, want 55000", err)
	}
	// The disk use stops growing: rounds of about 1.7 MiB of WAL each, a checkpoint after
	// each, leave the WAL directory no bigger than after the first (a slot still holding
	// its WAL would add the round's WAL every time).
	var sizes []int64
	for range 4 {
		write(t, pr.db, "t", 1500, 1000)
		if err := pr.db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, dirBytes(t, filepath.Join(pr.dir, wal.WALDirName)))
	}
	if slices.Max(sizes[1:]) > sizes[0]+seg {
		t.Fatalf("WAL directory %v bytes after each round of writes and a checkpoint: still growing past the invalidated slot", sizes)
	}
	t.Logf("WAL directory after each round: %v bytes", sizes)
}

// dirBytes is the total size of the regular files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// TestAStandbyThatStopsReplyingLeavesTheLagBoundAtTheSenderTimeout: a standby that has
// reported a replay position and then goes silent while staying connected counts in
// SlowestReplay (so a VACUUM's WAL lag bound keeps holding for it) only until the primary's
// sender timeout ends its stream; then it no longer counts and SlowestReplay's channel
// wakes the held vacuums, which the bound then lets go (a held vacuum goes on when no
// standby is attached: the throttle's and the server's tests of a departed standby).
func TestAStandbyThatStopsReplyingLeavesTheLagBoundAtTheSenderTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1, KeepaliveInterval: 100 * time.Millisecond,
		SenderTimeout: timeout})
	c := replConnect(t, pr.replURL("repl")+"&application_name=silent")
	if _, err := pglogrepl.CreateReplicationSlot(ctx, c, "s1", "", pglogrepl.CreateReplicationSlotOptions{
		Mode: pglogrepl.PhysicalReplication}); err != nil {
		t.Fatal(err)
	}
	start := pglogrepl.LSN(pr.db.WAL().FlushedLSN())
	if err := pglogrepl.StartReplication(ctx, c, "s1", start, pglogrepl.StartReplicationOptions{Mode: pglogrepl.PhysicalReplication, Timeline: 1}); err != nil {
		t.Fatal(err)
	}
	_, _, reported := pr.p.SlowestReplay()
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, c, pglogrepl.StandbyStatusUpdate{WALWritePosition: start,
		WALFlushPosition: start, WALApplyPosition: start}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reported:
	case <-time.After(10 * time.Second):
		t.Fatal("SlowestReplay's channel not closed 10 s after a status update")
	}
	replayed, n, left := pr.p.SlowestReplay()
	silentFrom := time.Now()
	if n != 1 || replayed != wal.LSN(start) {
		t.Fatalf("after the report SlowestReplay = %s, %d standbys; want %s, 1", replication.FormatLSN(replayed), n, start)
	}
	// The primary writes on; the standby neither reads nor replies from here.
	write(t, pr.db, "t", 200, 100)
	for {
		select {
		case <-left:
		case <-time.After(10 * time.Second):
			t.Fatalf("SlowestReplay's channel not closed 10 s after the standby went silent (sender timeout %v)", timeout)
		}
		_, n, next := pr.p.SlowestReplay()
		if n == 0 {
			break
		}
		left = next // woken by a flush of the primary's own WAL: the stream still runs
	}
	if waited := time.Since(silentFrom); waited < timeout {
		t.Fatalf("the silent standby stopped counting after %v, before the sender timeout %v", waited, timeout)
	}
}
