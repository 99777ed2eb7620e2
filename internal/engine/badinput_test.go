package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

func TestBadInputReturnsTypedErrors(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	defer endTx(tx)
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"insert into unknown table", func() error { _, err := tx.Insert("nope", []any{1, "a", 1}); return err }, ErrNoSuchTable},
		{"scan unknown table", func() error { return tx.Scan("nope", nil) }, ErrNoSuchTable},
		{"lookup unknown index", func() error { _, err := tx.IndexLookup("nope", 1); return err }, ErrNoSuchIndex},
		{"wrong column type", func() error { _, err := tx.Insert("t", []any{"one", "a", 1}); return err }, ErrWrongType},
		{"wrong column count", func() error { _, err := tx.Insert("t", []any{1, "a"}); return err }, ErrWrongColumnCount},
		{"oversized tuple", func() error { _, err := tx.Insert("t", []any{1, strings.Repeat("x", page.Size), 1}); return err }, ErrTupleTooLarge},
		{"update of missing tid", func() error {
			_, err := tx.Update("t", page.TID{Block: 0, Off: 99}, []any{1, "a", 1})
			return err
		}, ErrNotFound},
		{"duplicate table", func() error { return db.CreateTable("t", accountCols) }, ErrExists},
		{"index on no column", func() error { return db.CreateIndex("ix", "t") }, ErrBadDefinition},
		{"index on an unknown column", func() error { return db.CreateIndex("ix", "t", "id", "nope") }, ErrBadDefinition},
		{"index on unknown table", func() error { return db.CreateIndex("ix", "nope", "id") }, ErrNoSuchTable},
		{"table without columns", func() error { return db.CreateTable("empty", nil) }, ErrBadDefinition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.do(); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	_, err := tx.Insert("t", []any{1, 2, 3})
	var te *row.TypeError
	if !errors.As(err, &te) || te.Column != "owner" || te.Want != Bytea {
		t.Fatalf("wrong type error %v does not name column owner and type bytes", err)
	}
}

func TestClosedDBReturnsErrClosed(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{
		"Close":       db.Close(),
		"Begin":       func() error { _, err := db.Begin(); return err }(),
		"CreateTable": db.CreateTable("u", accountCols),
		"Checkpoint":  db.Checkpoint(),
		"Insert":      func() error { _, err := tx.Insert("t", []any{1, "a", 1}); return err }(),
		"Commit":      tx.Commit(),
		"Tables":      func() error { _, err := db.Tables(); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestOpenRefusesDirectoriesThatAreNotDataDirectories(t *testing.T) {
	if _, err := Open(t.TempDir(), testOpts()); !errors.Is(err, ErrNotDataDir) {
		t.Fatalf("Open of an empty dir: %v, want ErrNotDataDir", err)
	}
	_, dir := newDB(t, testOpts())
	if err := Init(dir, testOpts()); !errors.Is(err, ErrAlreadyInitialised) && !errors.Is(err, ErrInUse) {
		t.Fatalf("Init over a data directory: %v", err)
	}
}

func TestOpenRefusesAnUnknownDataDirectoryVersion(t *testing.T) {
	db, dir := newDB(t, testOpts())
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ctl, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctl.Version = DataVersion + 1
	if err := wal.WriteControl(vfs.OS(), dir, ctl); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, testOpts()); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Open of a future version: %v, want ErrUnsupportedVersion", err)
	}
}

func TestDirectIORoundTrip(t *testing.T) {
	opts := testOpts()
	opts.Direct = true
	db, dir := newDB(t, opts)
	fillTable(t, db, 1000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if rows := scanAll(t, db, "t"); len(rows) != 1000 {
		t.Fatalf("%d rows with O_DIRECT, want 1000", len(rows))
	}
	checkClean(t, db)
}
