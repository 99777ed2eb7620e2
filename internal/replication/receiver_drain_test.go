package replication

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// fakeWalsender serves one replication connection on ln: trust authentication,
// IDENTIFY_SYSTEM naming system sysID, then START_REPLICATION answered with CopyBoth and the
// given XLogData messages in a single write (as a walsender's pieces of WAL wait together in
// the socket when the standby is behind). It sends every standby status update it reads on
// updates until the connection ends.
func fakeWalsender(t *testing.T, ln net.Listener, sysID uint64, xlog [][]byte, updates chan<- StatusUpdate) {
	c, err := ln.Accept()
	if err != nil {
		t.Errorf("accept: %v", err)
		return
	}
	defer func() { _ = c.Close() }()
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		t.Errorf("startup: %v", err)
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		t.Errorf("startup: %v", err)
		return
	}
	if _, err := be.Receive(); err != nil { // IDENTIFY_SYSTEM
		t.Errorf("IDENTIFY_SYSTEM: %v", err)
		return
	}
	be.Send(&pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{{Name: []byte("systemid"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}})
	be.Send(&pgproto3.DataRow{Values: [][]byte{[]byte(strconv.FormatUint(sysID, 10))}})
	be.Send(&pgproto3.CommandComplete{CommandTag: []byte("IDENTIFY_SYSTEM")})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		t.Errorf("IDENTIFY_SYSTEM: %v", err)
		return
	}
	if _, err := be.Receive(); err != nil { // START_REPLICATION
		t.Errorf("START_REPLICATION: %v", err)
		return
	}
	be.Send(&pgproto3.CopyBothResponse{})
	for _, m := range xlog {
		be.Send(&pgproto3.CopyData{Data: m})
	}
	if err := be.Flush(); err != nil {
		t.Errorf("send WAL: %v", err)
		return
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		if cd, ok := msg.(*pgproto3.CopyData); ok {
			if fb, err := DecodeFeedback(cd.Data); err == nil && fb.Status != nil {
				updates <- *fb.Status
			}
		}
	}
}

// fakeStandbyDir is a standby data directory whose state says it flushed the primary
// sysID's WAL up to the first byte of segment 1.
func fakeStandbyDir(t *testing.T, sysID uint64, segSize int64) (string, wal.LSN) {
	dir := t.TempDir()
	start := wal.LSN(segSize)
	if err := writeStandbyState(vfs.OS(), dir, StandbyState{SystemID: sysID, Flushed: start, SegmentSize: segSize}); err != nil {
		t.Fatal(err)
	}
	return dir, start
}

// streamFromFake runs a receiver with a status interval of a minute (so that every update
// the test sees has another cause) against fakeWalsender until the test ends.
func streamFromFake(t *testing.T, dir string, sysID uint64, xlog [][]byte, replayed func() wal.LSN, flushed func()) (*Receiver, <-chan StatusUpdate) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan StatusUpdate, 1000)
	served := make(chan struct{})
	go func() {
		defer close(served)
		fakeWalsender(t, ln, sysID, xlog, updates)
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	r := NewReceiver(StandbyConfig{Primary: ConnConfig{Host: "127.0.0.1", Port: port, User: "repl", SSLMode: "disable"},
		Dir: dir, StatusInterval: time.Minute, Replayed: replayed, Flushed: flushed})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("receiver: %v", err)
		}
		_ = ln.Close()
		<-served
	})
	return r, updates
}

// xlogPieces is pieces XLogData messages of size bytes each from start, each with the
// primary's flushed end just past it, and the bytes they carry.
func xlogPieces(start wal.LSN, pieces, size int) ([][]byte, []byte) {
	var xlog [][]byte
	var all []byte
	for i := range pieces {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i + j)
		}
		at := start + wal.LSN(i*size)
		xlog = append(xlog, appendXLogData(nil, at, at+wal.LSN(size), time.Now(), data))
		all = append(all, data...)
	}
	return xlog, all
}

// A primary that flushes WAL in small pieces sends each with its flushed end just past it,
// so each piece alone "catches the standby up". When the pieces are already waiting in the
// connection (the standby is behind), the receiver writes them all before it fsyncs and
// reports, as PostgreSQL's walreceiver drains its socket first: one fsync for the batch, not
// one per piece. And once nothing more arrives it flushes and reports at once, without
// waiting for its status interval, so a synchronous commit does not wait for that.
func TestReceiverFlushesWALWaitingInTheConnectionOnceAndReportsWithoutWaitingForItsInterval(t *testing.T) {
	const (
		sysID   = 42
		segSize = 16 << 20
		pieces  = 32
		size    = 2 << 10 // the whole batch fits in loopback socket buffers
	)
	dir, start := fakeStandbyDir(t, sysID, segSize)
	xlog, want := xlogPieces(start, pieces, size)
	end := start + wal.LSN(pieces*size)
	var wakes atomic.Int64 // the engine's WakeFollow in a server
	r, updates := streamFromFake(t, dir, sysID, xlog, nil, func() { wakes.Add(1) })

	var flushes int
	deadline := time.After(20 * time.Second) // far below the status interval
	for done := false; !done; {
		select {
		case su := <-updates:
			if su.Flush > start {
				flushes++
			}
			done = su.Flush == end
		case <-deadline:
			t.Fatalf("no status update reported %s flushed within 20 s (status interval 1 min); %d reported a flush; receiver %+v",
				FormatLSN(end), flushes, r.Status())
		}
	}
	t.Logf("%d pieces of %d bytes waiting in the connection: %d status updates reported a flush", pieces, size, flushes)
	if n := wakes.Load(); n != int64(flushes) {
		t.Errorf("the Flushed hook ran %d times for %d flushes", n, flushes)
	}
	if flushes > pieces/4 {
		t.Errorf("%d status updates reported a flush for %d pieces of WAL that waited together: the receiver fsynced piece by piece", flushes, pieces)
	}
	seg, err := os.ReadFile(filepath.Join(dir, wal.WALDirName, wal.SegmentName(1, segSize)))
	if err != nil {
		t.Fatal(err)
	}
	if got := seg[:len(want)]; string(got) != string(want) {
		t.Errorf("segment 1 does not hold the WAL sent")
	}
	// The state file says where a restart resumes; within the segment it already names,
	// a flush does not rewrite it (saveState).
	if st, err := ReadStandbyState(dir); err != nil || st.Flushed != start {
		t.Errorf("standby state %+v (%v), want flushed still %s (all the WAL in the same segment)", st, err, FormatLSN(start))
	}
}

// The standby state may stay behind what was flushed, but never a segment behind what the
// primary was told (its slot keeps the segments from there on): a flush that enters another
// segment saves it first.
func TestStandbyStateIsSavedWhenAFlushEntersAnotherSegmentOnly(t *testing.T) {
	const seg = 16 << 20
	for _, c := range []struct {
		saved, flushed wal.LSN
		want           bool
	}{
		{seg, seg + 8192, false},
		{seg + 100, 2*seg - 1, false},
		{seg + 100, 2 * seg, true}, // the slot's restart position would be in segment 2
		{seg + 100, 3*seg + 5, true},
	} {
		if got := saveState(c.saved, c.flushed, seg); got != c.want {
			t.Errorf("saveState(%s, %s) = %v, want %v", FormatLSN(c.saved), FormatLSN(c.flushed), got, c.want)
		}
	}
}

// Replay applies flushed WAL a moment after the flush's report, which therefore carries an
// older replay position. The receiver reports the replay position again when it moves,
// without waiting for the next flush or its status interval, so the primary's replay lag
// (pg_stat_replication, an online run's status.replication) is not stale by that much.
func TestReceiverReportsReplayProgressWithoutWaitingForItsInterval(t *testing.T) {
	const (
		sysID   = 43
		segSize = 16 << 20
	)
	dir, start := fakeStandbyDir(t, sysID, segSize)
	xlog, _ := xlogPieces(start, 1, 8<<10)
	end := start + 8<<10
	var replayedTo atomic.Uint64
	replayedTo.Store(uint64(start))
	_, updates := streamFromFake(t, dir, sysID, xlog, func() wal.LSN { return wal.LSN(replayedTo.Load()) }, nil)

	wait := func(what string, ok func(StatusUpdate) bool) {
		t.Helper()
		deadline := time.After(20 * time.Second) // far below the status interval
		for {
			select {
			case su := <-updates:
				if ok(su) {
					return
				}
			case <-deadline:
				t.Fatalf("no status update %s within 20 s (status interval 1 min)", what)
			}
		}
	}
	wait("reported the WAL flushed", func(su StatusUpdate) bool { return su.Flush == end })
	replayedTo.Store(uint64(end)) // the engine replays it
	wait("reported it replayed", func(su StatusUpdate) bool { return su.Apply == end })
}

// A receiver whose flushes cross into the next WAL segment saves the standby state there,
// so that a restart resumes in a segment the primary still keeps.
func TestReceiverSavesTheStandbyStateWhenItsWALEntersTheNextSegment(t *testing.T) {
	const (
		sysID   = 44
		segSize = 16 << 20
		size    = 2 << 10
	)
	dir := t.TempDir()
	start := wal.LSN(2*segSize - 3*size)
	if err := writeStandbyState(vfs.OS(), dir, StandbyState{SystemID: sysID, Flushed: start, SegmentSize: segSize}); err != nil {
		t.Fatal(err)
	}
	xlog, _ := xlogPieces(start, 6, size)
	end := start + 6*size
	_, updates := streamFromFake(t, dir, sysID, xlog, nil, nil)
	deadline := time.After(20 * time.Second)
	for flushed := wal.LSN(0); flushed != end; {
		select {
		case su := <-updates:
			flushed = su.Flush
		case <-deadline:
			t.Fatalf("no status update reported %s flushed within 20 s", FormatLSN(end))
		}
	}
	st, err := ReadStandbyState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Flushed < 2*segSize || st.Flushed > end {
		t.Fatalf("standby state flushed %s after WAL flushed to %s: want it in segment 2 (from %s), not behind it",
			FormatLSN(st.Flushed), FormatLSN(end), FormatLSN(2*segSize))
	}
}
