package replication

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Message kinds inside CopyData of a START_REPLICATION stream.
const (
	msgXLogData      = 'w' // server: WAL
	msgKeepalive     = 'k' // server: primary keepalive
	msgStatusUpdate  = 'r' // client: standby status update
	msgHotStandbyFbk = 'h' // client: hot standby feedback
)

// pgEpoch is PostgreSQL's timestamp epoch: times on the wire are microseconds since it.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// pgEpochMicros is pgEpoch in Unix microseconds.
var pgEpochMicros = pgEpoch.UnixMicro()

func pgTime(t time.Time) int64 { return t.UnixMicro() - pgEpochMicros }

func fromPGTime(us int64) time.Time { return time.UnixMicro(us + pgEpochMicros) }

// StatusUpdate is a standby status update: the standby's positions.
type StatusUpdate struct {
	Write, Flush, Apply wal.LSN
	Time                time.Time
	ReplyRequested      bool
}

// Feedback is one decoded client message of a replication stream: a status update, or
// hot standby feedback (HotStandby set, read and otherwise ignored: the engine keeps no
// rows for standby queries).
type Feedback struct {
	Status     *StatusUpdate
	HotStandby bool
}

// DecodeFeedback decodes the contents of a CopyData a client sends during
// START_REPLICATION.
func DecodeFeedback(b []byte) (Feedback, error) {
	if len(b) == 0 {
		return Feedback{}, fmt.Errorf("empty CopyData in a replication stream")
	}
	be := binary.BigEndian
	switch b[0] {
	case msgStatusUpdate:
		if len(b) != 34 {
			return Feedback{}, fmt.Errorf("standby status update of %d bytes, want 34", len(b))
		}
		if b[33] > 1 {
			return Feedback{}, fmt.Errorf("standby status update: reply flag %d", b[33])
		}
		return Feedback{Status: &StatusUpdate{Write: wal.LSN(be.Uint64(b[1:])), Flush: wal.LSN(be.Uint64(b[9:])),
			Apply: wal.LSN(be.Uint64(b[17:])), Time: fromPGTime(int64(be.Uint64(b[25:]))), ReplyRequested: b[33] == 1}}, nil
	case msgHotStandbyFbk:
		if len(b) != 17 && len(b) != 25 {
			return Feedback{}, fmt.Errorf("hot standby feedback of %d bytes, want 17 or 25", len(b))
		}
		return Feedback{HotStandby: true}, nil
	}
	return Feedback{}, fmt.Errorf("unexpected replication stream message type %q", b[0])
}

// EncodeStatusUpdate is a standby's status update message (the standby side).
func EncodeStatusUpdate(s StatusUpdate) []byte {
	b := make([]byte, 34)
	be := binary.BigEndian
	b[0] = msgStatusUpdate
	be.PutUint64(b[1:], uint64(s.Write))
	be.PutUint64(b[9:], uint64(s.Flush))
	be.PutUint64(b[17:], uint64(s.Apply))
	be.PutUint64(b[25:], uint64(pgTime(s.Time)))
	if s.ReplyRequested {
		b[33] = 1
	}
	return b
}

// appendXLogData appends an XLogData message: WAL bytes starting at start, with the
// server's end of WAL.
func appendXLogData(b []byte, start, end wal.LSN, now time.Time, data []byte) []byte {
	b = append(b, msgXLogData)
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	b = binary.BigEndian.AppendUint64(b, uint64(pgTime(now)))
	return append(b, data...)
}

// encodeKeepalive is a primary keepalive message.
func encodeKeepalive(end wal.LSN, now time.Time, reply bool) []byte {
	b := make([]byte, 18)
	b[0] = msgKeepalive
	binary.BigEndian.PutUint64(b[1:], uint64(end))
	binary.BigEndian.PutUint64(b[9:], uint64(pgTime(now)))
	if reply {
		b[17] = 1
	}
	return b
}

// ServerMessage is one decoded server message of a replication stream (the standby
// side): XLogData (Data set, Start its position) or a keepalive.
type ServerMessage struct {
	Keepalive      bool
	Start, End     wal.LSN
	Time           time.Time
	Data           []byte
	ReplyRequested bool
}

// DecodeServerMessage decodes the contents of a CopyData the primary sends.
func DecodeServerMessage(b []byte) (ServerMessage, error) {
	be := binary.BigEndian
	if len(b) == 0 {
		return ServerMessage{}, fmt.Errorf("empty CopyData in a replication stream")
	}
	switch b[0] {
	case msgXLogData:
		if len(b) < 25 {
			return ServerMessage{}, fmt.Errorf("XLogData of %d bytes, at least 25", len(b))
		}
		return ServerMessage{Start: wal.LSN(be.Uint64(b[1:])), End: wal.LSN(be.Uint64(b[9:])),
			Time: fromPGTime(int64(be.Uint64(b[17:]))), Data: b[25:]}, nil
	case msgKeepalive:
		if len(b) != 18 || b[17] > 1 {
			return ServerMessage{}, fmt.Errorf("keepalive of %d bytes, want 18", len(b))
		}
		return ServerMessage{Keepalive: true, End: wal.LSN(be.Uint64(b[1:])), Time: fromPGTime(int64(be.Uint64(b[9:]))),
			ReplyRequested: b[17] == 1}, nil
	}
	return ServerMessage{}, fmt.Errorf("unexpected replication stream message type %q", b[0])
}
