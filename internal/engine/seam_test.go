package engine

import (
	"reflect"
	"slices"
	"testing"
)

// dbMethods is every exported method of *DB: the engine's public face.
// The plumbing a vacuum needs (table handles, the table lock, new
// relfilenodes, VACUUM FULL's switch) is not on it; package vacuum gets
// that through vacuum.Table, which vacuumTable implements. A new exported
// method is a change to the engine's API: add it here on purpose, or keep
// it unexported.
var dbMethods = []string{
	"AddPrimaryKey", "Begin", "BeginTx", "Check", "Checkpoint", "Close",
	"CatalogGeneration", // changes with every DDL: the server's plan cache keeps a plan while it stands
	"CreateIndex", "CreateTable", "CreateUniqueIndex", "Dir", "DropTable",
	"CurrentLSN", "ReceivedLSN", // pg_current_wal_lsn() and pg_last_wal_receive_lsn(): the lag a run reports
	"FS",                                                                      // for files kept beside the engine's (replication slots)
	"Follow", "InRecovery", "LastReplayTime", "ReplayedLSN", "StandbyCancels", // a hot standby's replay (OpenStandby)
	"WakeFollow", // the standby's receiver: more WAL is durable, replay it now
	"LockStats", "PurgeQuarantine", "Quarantine", "RecoveryInfo", "RuntimeStats",
	"SetCommitWait", // synchronous replication: a commit waits for a standby's flush
	"Stats", "SystemID", "Table", "TablePages", "Tables", "TruncateTable",
	"Vacuum", "VacuumBatch", "VacuumFull", // the three ways to vacuum, each under the table's vacuum lock
	"VacuumPosition", // where a resumable lazy vacuum of a table last stopped (a run's status)
	"WAL",            // for a reader that follows the log (a standby)
}

// TestDBExportsOnlyItsAllowList holds *DB's exported methods to dbMethods.
func TestDBExportsOnlyItsAllowList(t *testing.T) {
	var got []string
	for m := range reflect.TypeFor[*DB]().Methods() {
		got = append(got, m.Name)
	}
	want := slices.Sorted(slices.Values(dbMethods))
	for _, name := range got {
		if !slices.Contains(want, name) {
			t.Errorf("*DB exports %s, which is not on dbMethods: unexport it, or add it there on purpose", name)
		}
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("dbMethods names %s, which *DB no longer exports: remove it there", name)
		}
	}
}
