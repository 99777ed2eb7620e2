package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/fixture"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// extractFixture unpacks testdata/upgrade/name into a fresh directory.
func extractFixture(t testing.TB, name string) string {
	t.Helper()
	return fixture.Extract(t, filepath.Join("testdata", "upgrade", name))
}

// verifyV1Fixture checks every row of testdata/upgrade/v1.tar.gz (see its
// README) through a scan and the index, and that Check is clean.
func verifyV1Fixture(t testing.TB, db *DB) {
	t.Helper()
	accounts := scanAll(t, db, "accounts")
	tx := mustTx(t, db)
	defer endTx(tx)
	n := 0
	for id := int64(1); id <= 300; id++ {
		got, ok := accounts[id]
		found, err := tx.IndexLookup("accounts_id", id)
		if err != nil {
			t.Fatal(err)
		}
		if id%7 == 0 {
			if ok || len(found) != 0 {
				t.Fatalf("deleted id %d still visible: %v %v", id, got, found)
			}
			continue
		}
		n++
		bal := 10 * id
		if id%3 == 0 {
			bal++
		}
		want := []any{id, []byte(fmt.Sprintf("owner-%03d", id)), bal}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("accounts %d = %#v, want %#v", id, got, want)
		}
		if len(found) != 1 || !reflect.DeepEqual(found[0].Row, want) {
			t.Fatalf("index lookup %d = %v, want %v", id, found, want)
		}
	}
	if len(accounts) != n {
		t.Fatalf("accounts has %d rows, want %d (no aborted row visible)", len(accounts), n)
	}
	notes := scanAll(t, db, "notes")
	if len(notes) != 20 {
		t.Fatalf("notes has %d rows, want 20", len(notes))
	}
	for k := int64(1); k <= 20; k++ {
		var body []byte
		for len(body) < int(k)*15 {
			body = append(body, fmt.Sprintf("note %d;", k)...)
		}
		if got := notes[k]; !reflect.DeepEqual(got, []any{k, body}) {
			t.Fatalf("notes %d = %#v", k, got)
		}
	}
	checkClean(t, db)
}

// TestUpgradeOfAFormatOneDirectory: the fixture made by the code before
// this format (testdata/upgrade) is refused by Open with an error naming
// the upgrade command; Upgrade brings it to this version (and a second
// Upgrade does nothing); then every row reads back, the types have their
// new names, Check is clean, and the table takes NULLs (NULLs through a
// crash: TestEveryTypeAndNullSurvivesACrash).
func TestUpgradeOfAFormatOneDirectory(t *testing.T) {
	dir := extractFixture(t, "v1.tar.gz")
	opts := Options{BufferPoolBytes: 1 << 20}
	_, err := Open(dir, opts)
	if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "vacuum-runner upgrade") {
		t.Fatalf("Open of a version-1 directory: %v, want ErrUnsupportedVersion naming vacuum-runner upgrade", err)
	}
	res, err := Upgrade(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res != (UpgradeResult{From: 1, To: DataVersion, Upgraded: true}) {
		t.Fatalf("Upgrade = %+v", res)
	}
	if res, err := Upgrade(dir, opts); err != nil || res.Upgraded || res.From != DataVersion {
		t.Fatalf("second Upgrade = %+v, %v; want a no-op", res, err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ti, err := db.Table("accounts")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Column{{Name: "id", Type: Int8}, {Name: "owner", Type: Bytea}, {Name: "balance", Type: Int8}}; !reflect.DeepEqual(ti.Columns, want) {
		t.Fatalf("columns after upgrade %v, want %v", ti.Columns, want)
	}
	verifyV1Fixture(t, db)
	tx := mustTx(t, db)
	if _, err := tx.Insert("accounts", []any{int64(5000), nil, nil}); err != nil {
		t.Fatalf("insert with NULLs into an upgraded table: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if got := scanAll(t, db, "accounts")[5000]; !reflect.DeepEqual(got, []any{int64(5000), nil, nil}) {
		t.Fatalf("row with NULLs: %#v", got)
	}
	checkClean(t, db)
}

// TestUpgradeIsCrashSafeAtEveryStep cuts the power at every file
// operation of Upgrade in turn. After each cut the control file and the
// catalog are each whole (the old or the new version), Open refuses or
// accepts the directory accordingly, and a plain Upgrade finishes the
// job. Upgrade touches no other file, so the rows are verified by a full
// Open only at the first cut between the catalog and the control file,
// and at the end.
func TestUpgradeIsCrashSafeAtEveryStep(t *testing.T) {
	cases := []struct {
		fixture string
		from    uint32
		decode  func([]byte) (*catalog.Catalog, error)
		verify  func(testing.TB, *DB)
	}{
		{"v1.tar.gz", 1, catalog.DecodeV1, verifyV1Fixture},
		{"v2.tar.gz", 2, catalog.DecodeV2, verifyV2Fixture},
	}
	for _, c := range cases {
		t.Run("from format "+strconv.Itoa(int(c.from)), func(t *testing.T) {
			upgradeIsCrashSafeAtEveryStep(t, c.fixture, c.from, c.decode, c.verify)
		})
	}
}

// upgradeIsCrashSafeAtEveryStep cuts the power after each file operation of Upgrade of
// the fixture (a directory of format from) in turn: whatever the cut leaves is either the
// old format (refused by Open, upgraded by a second Upgrade) or the new one, never a mix
// that neither reads, and the upgraded directory holds the fixture's rows.
func upgradeIsCrashSafeAtEveryStep(t *testing.T, fixture string, from uint32, decodeOld func([]byte) (*catalog.Catalog, error), verify func(testing.TB, *DB)) {
	opts := Options{BufferPoolBytes: 1 << 20}
	between := 0
	for n := 1; ; n++ {
		dir := extractFixture(t, fixture)
		ffs := faultfs.New(vfs.OS())
		ffs.CrashAfter(n, faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(n)})
		o := opts
		o.FS = ffs
		_, err := Upgrade(dir, o)
		crashed := errors.Is(err, faultfs.ErrPoweredOff) || ffs.PoweredOff()
		if err != nil && !crashed {
			t.Fatalf("cut after %d ops: Upgrade: %v", n, err)
		}
		if !crashed {
			_ = ffs.PowerLoss(faultfs.PowerLossOptions{})
		}
		ctl, err := wal.ReadControl(vfs.OS(), dir)
		if err != nil {
			t.Fatalf("cut after %d ops: control file: %v", n, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, catalog.FileName))
		if err != nil {
			t.Fatal(err)
		}
		cv, err := catalog.VersionOf(b)
		if err != nil {
			t.Fatalf("cut after %d ops: catalog: %v", n, err)
		}
		switch {
		case ctl.Version == from && cv == from:
			_, err = decodeOld(b)
		case cv == catalog.Version:
			_, err = catalog.Decode(b)
		default:
			t.Fatalf("cut after %d ops: control version %d over catalog version %d", n, ctl.Version, cv)
		}
		if err != nil {
			t.Fatalf("cut after %d ops: catalog does not decode: %v", n, err)
		}
		if ctl.Version == from {
			if _, err := Open(dir, opts); !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("cut after %d ops: Open of a version-%d control file: %v", n, from, err)
			}
		}
		if _, err := Upgrade(dir, opts); err != nil {
			t.Fatalf("cut after %d ops: Upgrade after the cut: %v", n, err)
		}
		if ctl.Version == from && cv == catalog.Version {
			between++
		}
		if (between == 1 && ctl.Version == from && cv == catalog.Version) || !crashed {
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("cut after %d ops: Open: %v", n, err)
			}
			verify(t, db)
			closeDB(t, db)
		}
		if !crashed {
			t.Logf("Upgrade completes in %d file operations; %d cuts fell between the catalog and the control file", n-1, between)
			if between == 0 {
				t.Fatal("no cut fell between the catalog and the control file replace: the sweep missed the window")
			}
			return
		}
	}
}

// verifyV2Fixture checks the format-2 fixture's rows after an upgrade: ids 1..2000 less
// every 9th, each found once through the (layout-1) primary key, and Check clean.
func verifyV2Fixture(t testing.TB, db *DB) {
	t.Helper()
	tx := mustTx(t, db)
	for i := 1; i <= 2000; i++ {
		found, err := tx.IndexLookup("people_pkey", i)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if i%9 == 0 {
			want = 0
		}
		if len(found) != want {
			t.Fatalf("id %d: %d rows through people_pkey, want %d", i, len(found), want)
		}
	}
	if n := len(scanAll(t, db, "people")); n != 2000-2000/9 {
		t.Fatalf("people has %d rows, want %d", n, 2000-2000/9)
	}
	endTx(tx)
	rep, err := db.Check(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("Check: %+v, %v", rep, err)
	}
}

func TestUpgradeRefusesANewerDirectory(t *testing.T) {
	if _, err := Upgrade(newerDataDir(t), testOpts()); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Upgrade of a newer directory: %v, want ErrUnsupportedVersion", err)
	}
	if _, err := Upgrade(t.TempDir(), testOpts()); !errors.Is(err, ErrNotDataDir) {
		t.Fatalf("Upgrade of an empty directory: %v, want ErrNotDataDir", err)
	}
}

// TestUpgradeOfAFormatTwoDirectoryKeepsItsLayoutOneIndexes: the fixture
// made by the code of format 2 (testdata/upgrade/v2.tar.gz: an int4
// primary key and a nullable int2 index, both B-tree layout 1) is refused
// by Open, upgraded to format 3 without touching its index pages, and
// then works: every row reads through both indexes, 1000 inserts split
// the layout-1 leaves, the primary key still refuses duplicates, Check is
// clean, and VACUUM FULL rebuilds both indexes in layout 2.
func TestUpgradeOfAFormatTwoDirectoryKeepsItsLayoutOneIndexes(t *testing.T) {
	dir := extractFixture(t, "v2.tar.gz")
	opts := Options{BufferPoolBytes: 1 << 20}
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "vacuum-runner upgrade") {
		t.Fatalf("Open of a version-2 directory: %v, want ErrUnsupportedVersion naming vacuum-runner upgrade", err)
	}
	res, err := Upgrade(dir, opts)
	if err != nil || res != (UpgradeResult{From: 2, To: DataVersion, Upgraded: true}) {
		t.Fatalf("Upgrade = %+v, %v", res, err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	layouts := func() []int {
		st, err := db.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, ix := range st[0].Indexes {
			out = append(out, ix.Layout)
		}
		return out
	}
	if got := layouts(); !reflect.DeepEqual(got, []int{1, 1}) {
		t.Fatalf("index layouts after upgrade %v, want [1 1]", got)
	}
	// Rows 1..2000 less every 9th; name NULL every 4th, score NULL every 5th.
	verify := func(upTo int) {
		t.Helper()
		tx := mustTx(t, db)
		defer endTx(tx)
		perScore := map[int64]int{}
		for i := 1; i <= upTo; i++ {
			found, err := tx.IndexLookup("people_pkey", i)
			if err != nil {
				t.Fatal(err)
			}
			if i%9 == 0 && i <= 2000 {
				if len(found) != 0 {
					t.Fatalf("deleted id %d found", i)
				}
				continue
			}
			if len(found) != 1 || i64(found[0].Row[0]) != int64(i) {
				t.Fatalf("id %d: found %v", i, found)
			}
			if s := found[0].Row[2]; s != nil {
				perScore[i64(s)]++
			}
		}
		for score, want := range perScore {
			found, err := tx.IndexLookup("people_score", score)
			if err != nil || len(found) != want {
				t.Fatalf("score %d: %d rows, %v; want %d", score, len(found), err, want)
			}
		}
	}
	verify(2000)
	tx := mustTx(t, db)
	for i := 2001; i <= 3000; i++ { // the rightmost leaves split
		if _, err := tx.Insert("people", []any{i, "new", i % 100, nil}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = tx.Insert("people", []any{5, "again", 1, nil})
	wantUniqueViolation(t, err, "people_pkey", 5)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	verify(3000)
	checkClean(t, db)
	if got := layouts(); !reflect.DeepEqual(got, []int{1, 1}) {
		t.Fatalf("index layouts after inserts %v, want [1 1]", got)
	}
	if _, err := db.VacuumFull(context.Background(), "people", vacuum.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	if got := layouts(); !reflect.DeepEqual(got, []int{2, 2}) {
		t.Fatalf("index layouts after VACUUM FULL %v, want [2 2]", got)
	}
	verify(3000)
	checkClean(t, db)
}

// TestUpgradeOfAFormatThreeDirectoryReplaysItsWAL: the fixture made by the code of format
// 3 (testdata/upgrade/v3.tar.gz: a table and its index, rows, a VACUUM FULL, more rows,
// then a crash, so its WAL holds all of it without relation file records) is refused by
// Open, upgraded to format 4 by its control file alone, and its first Open replays that
// WAL: the retired heap's records are skipped, every committed row is there, and Check
// is clean.
func TestUpgradeOfAFormatThreeDirectoryReplaysItsWAL(t *testing.T) {
	dir := extractFixture(t, "v3.tar.gz")
	opts := Options{BufferPoolBytes: 1 << 20}
	if _, err := Open(dir, opts); !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "vacuum-runner upgrade") {
		t.Fatalf("Open of a version-3 directory: %v, want ErrUnsupportedVersion naming vacuum-runner upgrade", err)
	}
	res, err := Upgrade(dir, opts)
	if err != nil || res != (UpgradeResult{From: 3, To: DataVersion, Upgraded: true}) {
		t.Fatalf("Upgrade = %+v, %v", res, err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if info := db.RecoveryInfo(); info.CleanShutdown || info.Replayed == 0 {
		t.Fatalf("the fixture's Open replayed %d records (clean shutdown %v): it should recover a crash", info.Replayed, info.CleanShutdown)
	}
	rows := scanAll(t, db, "accounts")
	want := 0
	for i := int64(1); i <= 3000; i++ {
		if i%7 != 0 {
			want++
			if r, ok := rows[i]; !ok || i64(r[2]) != 10*i {
				t.Fatalf("id %d: %v", i, r)
			}
		}
	}
	for i := int64(5000); i < 5010; i++ {
		if _, ok := rows[i]; !ok {
			t.Fatalf("id %d committed after the VACUUM FULL is missing", i)
		}
	}
	if len(rows) != want+10 {
		t.Fatalf("%d rows, want %d", len(rows), want+10)
	}
	checkClean(t, db)
}
