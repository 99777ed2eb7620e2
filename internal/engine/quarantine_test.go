package engine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// quarantined lists the file names under the quarantine directory.
func quarantined(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(filepath.Join(dir, QuarantineDirName), func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err == nil && !d.IsDir() {
			names = append(names, d.Name())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func TestOrphansOfADirectoryWithAMissingRelationAreQuarantinedNotDeleted(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	fillTable(t, db, 300)
	if err := db.CreateTable("u", accountCols); err != nil {
		t.Fatal(err)
	}
	u, _ := db.Table("u")
	closeDB(t, db)
	// The catalog names u's files under one number; they are on disk under
	// another (a catalog restored from elsewhere, or a switch undone).
	for _, suffix := range []string{"", "_vm", "_fsm"} {
		from := filepath.Join(dir, "base", strconv.Itoa(int(u.Relfilenode))+suffix)
		if err := os.Rename(from, filepath.Join(dir, "base", "90000"+suffix)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(dir, opts)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), QuarantineDirName) {
		t.Fatalf("Open with a missing relation = %v, want ErrCorrupt naming the quarantine", err)
	}
	if got, want := quarantined(t, dir), []string{"90000", "90000_fsm", "90000_vm"}; !slices.Equal(got, want) {
		t.Fatalf("quarantine holds %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "base", "90000")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the orphan is still in base/ (%v)", err)
	}
}

func TestOrphansAfterAnUncertainCatalogSwitchAreQuarantinedAndPurgeEmptiesIt(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	fillTable(t, db, 300)
	ti, _ := db.Table("t")
	closeDB(t, db)
	heapPath := filepath.Join(dir, "base", strconv.Itoa(int(ti.Relfilenode)))
	if err := copyFile(heapPath, filepath.Join(dir, "base", "90000")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, uncertainSwitchName), []byte("swap \"t\": test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	info := db.RecoveryInfo()
	if !slices.Equal(info.OrphansQuarantined, []storage.RelFileNode{90000}) || len(info.OrphansRemoved) != 0 {
		t.Fatalf("recovery quarantined %v and removed %v, want 90000 quarantined", info.OrphansQuarantined, info.OrphansRemoved)
	}
	if !strings.Contains(info.QuarantineReason, "catalog switch") {
		t.Fatalf("quarantine reason %q does not name the uncertain switch", info.QuarantineReason)
	}
	if _, err := os.Stat(filepath.Join(dir, uncertainSwitchName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the marker is still there after its orphans were quarantined (%v)", err)
	}
	st, err := os.Stat(heapPath)
	if err != nil {
		t.Fatal(err)
	}
	qi, err := db.Quarantine()
	if err != nil || qi.Files != 1 || qi.Bytes != st.Size() {
		t.Fatalf("Quarantine() = %+v, %v; want 1 file of %d bytes", qi, err, st.Size())
	}
	if rows := scanAll(t, db, "t"); len(rows) != 300 {
		t.Fatalf("%d rows, want 300", len(rows))
	}
	checkClean(t, db)
	purged, err := db.PurgeQuarantine()
	if err != nil || purged.Files != 1 {
		t.Fatalf("PurgeQuarantine() = %+v, %v; want the one file", purged, err)
	}
	if qi, err := db.Quarantine(); err != nil || qi.Files != 0 || qi.Bytes != 0 {
		t.Fatalf("Quarantine() after purge = %+v, %v; want empty", qi, err)
	}
}
