// Package replication is the engine server's physical streaming replication, speaking
// PostgreSQL's replication protocol (the walsender's commands over a connection started
// with the startup parameter replication), so that pgx's pgconn with jackc/pglogrepl, and
// PostgreSQL 15's own pg_receivewal, drive it unchanged.
//
// Primary side (Primary, a wire.ReplicationHandler): IDENTIFY_SYSTEM (the control file's
// system identifier, timeline 1, the flushed end of WAL), SHOW wal_segment_size and
// data_directory_mode, CREATE_/READ_/DROP_REPLICATION_SLOT (physical slots, Slots, saved
// crash-safely in the data directory), START_REPLICATION [SLOT s] PHYSICAL <lsn> answered
// with CopyBoth, XLogData read from the WAL segment files up to the flushed end, keepalives,
// and the client's standby status updates (write, flush, replay), recorded per connection
// with PostgreSQL's lag measures (Standbys) and advancing the slot. The engine's WAL
// segments are PostgreSQL's (16 MiB, named by timeline 1 and position), so a byte position
// is the same LSN on both sides and pg_receivewal's files equal the server's.
//
// Retention: the log keeps every segment from the oldest position a valid slot (as saved
// on disk), a running stream or a base backup still needs. A slot more than
// --max-slot-wal-keep-size behind is invalidated, logged and counted
// (engine_server_replication_slot_invalidations_total), and stops holding WAL.
//
// Base backup (VACUUMOPS_BASE_BACKUP, BaseBackup on the client side): a checkpoint, the
// data directory's files copied while writes go on, the WAL from the checkpoint's redo
// point to the end of WAL after the copy, and the control file last. The engine's
// recovery at the copy's first Open replays that WAL and repairs the pages caught
// mid-write (their first change after the redo point carries a full image). The catalog is
// in the WAL (every switch logs it, with a sequence number), so DDL during or after a base
// backup reaches the copy through replay.
//
// Standby (Receiver): streams WAL into the standby's wal/, fsyncs it before reporting it
// flushed (once for all the WAL waiting in the connection, as PostgreSQL's walreceiver
// drains its socket first), reports the engine's replay position as the apply LSN whenever
// replay moves, and resumes after a cut or a crash (where the standby state file says: it
// is saved when a flush enters another WAL segment, not at every flush, see saveState);
// the engine replays it continuously (engine.OpenStandby, DB.Follow, woken after each fsync
// by StandbyConfig.Flushed) while the server answers read-only queries, with pg_stat_wal_receiver (Receiver.Views). Relation
// files are in the WAL too (the engine's relfile.go): their creation, so a standby restarted
// in the middle of a VACUUM FULL still applies the rewrite; their abandon, so a cancelled
// rewrite's files go from the standby as from the primary; and each primary Open's end of
// recovery, where the standby sweeps (or quarantines, when anything is inconsistent) the
// files created before it that its catalog does not name.
package replication
