package replication

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// ConnConfig is how a standby or a base backup reaches its primary, with libpq's
// conventions: an empty Password lets pgconn take PGPASSWORD or ~/.pgpass.
type ConnConfig struct {
	Host, Port, User, Password string
	SSLMode, SSLRootCert       string
	AppName                    string
}

// Connect opens a physical replication connection to the primary.
func (cc ConnConfig) Connect(ctx context.Context) (*pgconn.PgConn, error) {
	kv := []string{"host=" + quoteDSN(cc.Host), "port=" + quoteDSN(cc.Port), "replication=true",
		"dbname=replication", "connect_timeout=10"}
	for k, v := range map[string]string{"user": cc.User, "password": cc.Password, "sslmode": cc.SSLMode,
		"sslrootcert": cc.SSLRootCert, "application_name": cc.AppName} {
		if v != "" {
			kv = append(kv, k+"="+quoteDSN(v))
		}
	}
	cfg, err := pgconn.ParseConfig(strings.Join(kv, " "))
	if err != nil {
		return nil, fmt.Errorf("primary %s:%s: %w", cc.Host, cc.Port, err)
	}
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to primary %s:%s: %w", cc.Host, cc.Port, err)
	}
	return c, nil
}

func quoteDSN(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// StandbyStateFileName is the standby's record, in its data directory, of the primary it
// follows and how far it has received and fsynced the primary's WAL: a base backup writes
// it with the backup's end, the WAL receiver after each fsync.
const StandbyStateFileName = "standby_state.json"

// StandbyState is the content of StandbyStateFileName.
type StandbyState struct {
	SystemID uint64  `json:"systemID"`
	Flushed  wal.LSN `json:"flushed"`
	// SegmentSize is the primary's WAL segment size.
	SegmentSize int64 `json:"segmentSize"`
}

// ReadStandbyState reads dir's standby state (fs.ErrNotExist when there is none).
func ReadStandbyState(dir string) (StandbyState, error) {
	var st StandbyState
	b, err := os.ReadFile(filepath.Join(dir, StandbyStateFileName))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("standby state %s: %w", filepath.Join(dir, StandbyStateFileName), err)
	}
	return st, nil
}

// writeStandbyState saves st crash-safely.
func writeStandbyState(fsys vfs.FS, dir string, st StandbyState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(fsys, dir, StandbyStateFileName, StandbyStateFileName+".tmp", b)
}

// BackupResult says what BaseBackup copied.
type BackupResult struct {
	SystemID   uint64
	Redo, End  wal.LSN
	Files      int
	Bytes      int64
	WALSegment int
}

// BaseBackup copies the primary's data directory into dir (absent or empty) through an
// open replication connection: the files, the WAL from the backup's redo point to its
// end, and last the control file, each fsynced (and the directories), then the standby
// state. Opening dir with the engine replays that WAL, giving the primary as it was at
// the end; a standby streams on from there.
func BaseBackup(ctx context.Context, conn *pgconn.PgConn, dir string) (BackupResult, error) {
	var res BackupResult
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return res, fmt.Errorf("base backup into %s: the directory is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("base backup into %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, fmt.Errorf("base backup: %w", err)
	}
	id, err := identify(ctx, conn)
	if err != nil {
		return res, err
	}
	res.SystemID = id
	fsys := vfs.OS()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.Conn().SetDeadline(deadline)
		defer func() { _ = conn.Conn().SetDeadline(time.Time{}) }()
	}
	fe := conn.Frontend()
	fe.Send(&pgproto3.Query{String: BaseBackupCommand})
	if err := fe.Flush(); err != nil {
		return res, fmt.Errorf("base backup: send: %w", err)
	}
	bw := &backupFiles{fs: fsys, dir: dir, dirs: map[string]bool{dir: true}}
	defer bw.closeCurrent()
	var ctl []byte
	var segSize int64
	for {
		msg, err := fe.Receive()
		if err != nil {
			return res, fmt.Errorf("base backup: receive: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyOutResponse, *pgproto3.CopyDone, *pgproto3.CommandComplete,
			*pgproto3.NoticeResponse, *pgproto3.ParameterStatus:
		case *pgproto3.ErrorResponse:
			return res, fmt.Errorf("base backup: primary: %w", pgconn.ErrorResponseToPgError(m))
		case *pgproto3.ReadyForQuery:
			if ctl == nil {
				return res, errors.New("base backup: the primary ended without the control file")
			}
			if err := bw.finish(); err != nil {
				return res, err
			}
			if err := vfs.WriteFileAtomic(fsys, dir, wal.ControlFileName, wal.ControlFileName+".tmp", ctl); err != nil {
				return res, fmt.Errorf("base backup: %w", err)
			}
			if err := writeStandbyState(fsys, dir, StandbyState{SystemID: id, Flushed: res.End, SegmentSize: segSize}); err != nil {
				return res, fmt.Errorf("base backup: %w", err)
			}
			res.Files, res.Bytes = bw.files, bw.bytes
			return res, nil
		case *pgproto3.CopyData:
			d := m.Data
			if len(d) == 0 {
				return res, errors.New("base backup: empty message")
			}
			switch d[0] {
			case bbData:
				if err := bw.write(d[1:]); err != nil {
					return res, err
				}
			case bbDir, bbFile, bbSegment:
				name, rest, err := backupName(d[1:])
				if err != nil {
					return res, err
				}
				switch d[0] {
				case bbDir:
					err = bw.mkdir(name)
				case bbFile:
					err = bw.open(name, 0)
				case bbSegment:
					if len(rest) != 24 {
						return res, fmt.Errorf("base backup: WAL segment header of %d bytes", len(rest))
					}
					segSize = int64(binary.BigEndian.Uint64(rest[16:]))
					if _, ok := wal.ParseSegmentName(name, segSize); !ok || segSize < wal.MinSegmentSize || segSize > wal.MaxSegmentSize {
						return res, fmt.Errorf("base backup: bad WAL segment %q of size %d", name, segSize)
					}
					res.WALSegment++
					err = bw.open(wal.WALDirName+"/"+name, segSize)
				}
				if err != nil {
					return res, err
				}
			case bbEnd:
				if len(d) < 17 {
					return res, errors.New("base backup: short end message")
				}
				res.End, res.Redo = wal.LSN(binary.BigEndian.Uint64(d[1:])), wal.LSN(binary.BigEndian.Uint64(d[9:]))
				c, err := wal.DecodeControl(d[17:])
				if err != nil {
					return res, fmt.Errorf("base backup: control file: %w", err)
				}
				if c.SystemID != id {
					return res, fmt.Errorf("base backup: control file of system %d, the primary identified as %d", c.SystemID, id)
				}
				ctl = append([]byte(nil), d[17:]...)
			default:
				return res, fmt.Errorf("base backup: unknown message %q", d[0])
			}
		default:
			return res, fmt.Errorf("base backup: unexpected %T", msg)
		}
	}
}

// backupName decodes a u16-length-prefixed relative name, refusing anything that would
// leave the directory.
func backupName(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, errors.New("base backup: short name")
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n || n == 0 {
		return "", nil, errors.New("base backup: short name")
	}
	name := string(b[2 : 2+n])
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(name)))
	if clean != name || filepath.IsAbs(name) || strings.HasPrefix(name, "../") || name == ".." || strings.ContainsRune(name, 0) {
		return "", nil, fmt.Errorf("base backup: refused file name %q", name)
	}
	return name, b[2+n:], nil
}

// backupFiles writes a base backup's files.
type backupFiles struct {
	fs    vfs.FS
	dir   string
	dirs  map[string]bool
	cur   vfs.File
	off   int64
	pad   int64 // size to extend the current file to (a WAL segment), 0 = none
	files int
	bytes int64
}

func (w *backupFiles) mkdir(name string) error {
	p := filepath.Join(w.dir, filepath.FromSlash(name))
	if err := w.fs.MkdirAll(p, 0o700); err != nil {
		return fmt.Errorf("base backup: %w", err)
	}
	w.dirs[p] = true
	return nil
}

func (w *backupFiles) open(name string, pad int64) error {
	if err := w.closeCurrent(); err != nil {
		return err
	}
	p := filepath.Join(w.dir, filepath.FromSlash(name))
	if err := w.fs.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("base backup: %w", err)
	}
	w.dirs[filepath.Dir(p)] = true
	f, err := w.fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("base backup: %w", err)
	}
	w.cur, w.off, w.pad = f, 0, pad
	w.files++
	return nil
}

func (w *backupFiles) write(b []byte) error {
	if w.cur == nil {
		return errors.New("base backup: data outside a file")
	}
	if w.pad > 0 && w.off+int64(len(b)) > w.pad {
		return errors.New("base backup: WAL segment data past its size")
	}
	if _, err := w.cur.WriteAt(b, w.off); err != nil {
		return fmt.Errorf("base backup: write %s: %w", w.cur.Name(), err)
	}
	w.off += int64(len(b))
	w.bytes += int64(len(b))
	return nil
}

// closeCurrent completes the current file: zero-filled to its segment size, fsynced.
func (w *backupFiles) closeCurrent() error {
	f := w.cur
	if f == nil {
		return nil
	}
	w.cur = nil
	if w.pad > 0 {
		if err := f.Truncate(w.pad); err != nil {
			_ = f.Close()
			return fmt.Errorf("base backup: extend %s: %w", f.Name(), err)
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("base backup: fsync %s: %w", f.Name(), err)
	}
	return f.Close()
}

// finish closes the last file and fsyncs every directory written.
func (w *backupFiles) finish() error {
	if err := w.closeCurrent(); err != nil {
		return err
	}
	for d := range w.dirs {
		if err := w.fs.SyncDir(d); err != nil {
			return fmt.Errorf("base backup: fsync directory %s: %w", d, err)
		}
	}
	return w.fs.MkdirAll(filepath.Join(w.dir, wal.WALDirName), 0o700)
}

// identify runs IDENTIFY_SYSTEM and returns the primary's system identifier.
func identify(ctx context.Context, conn *pgconn.PgConn) (uint64, error) {
	res, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		return 0, fmt.Errorf("IDENTIFY_SYSTEM: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 1 {
		return 0, errors.New("IDENTIFY_SYSTEM: unexpected result")
	}
	var id uint64
	if _, err := fmt.Sscan(string(res[0].Rows[0][0]), &id); err != nil {
		return 0, fmt.Errorf("IDENTIFY_SYSTEM: system identifier %q: %w", res[0].Rows[0][0], err)
	}
	return id, nil
}
