package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Column is one column of a table: a name, a type, a length for varchar
// and bpchar, and NOT NULL (package row documents each type's Go value).
type Column = row.Column

// ColumnType is a column's type, named as PostgreSQL names it.
type ColumnType = row.Type

// Column types (package row).
const (
	Int2        = row.Int2
	Int4        = row.Int4
	Int8        = row.Int8
	Bool        = row.Bool
	Text        = row.Text
	Varchar     = row.Varchar
	Bpchar      = row.Bpchar
	Bytea       = row.Bytea
	Timestamp   = row.Timestamp
	Timestamptz = row.Timestamptz
)

// TableInfo describes a table.
type TableInfo struct {
	Name        string
	OID         uint32
	Relfilenode storage.RelFileNode
	Columns     []Column
	Indexes     []IndexInfo
}

// IndexInfo describes an index.
type IndexInfo struct {
	Name    string
	OID     uint32
	Column  string   // the first key column (Columns[0]), for single-column callers
	Columns []string // key columns, in key order
	// Relfilenode is the index's file.
	Relfilenode storage.RelFileNode
	Unique      bool
}

func tableInfo(t *catalog.Table) TableInfo {
	ti := TableInfo{Name: t.Name, OID: t.OID, Relfilenode: t.Rel, Columns: append([]Column(nil), t.Columns...)}
	for _, ix := range t.Indexes {
		ti.Indexes = append(ti.Indexes, IndexInfo{Name: ix.Name, OID: ix.OID, Column: ix.Columns[0],
			Columns: slices.Clone(ix.Columns), Relfilenode: ix.Rel, Unique: ix.Unique})
	}
	return ti
}

// Tables lists every table, in creation order.
func (db *DB) Tables() ([]TableInfo, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]TableInfo, 0, len(db.cat.Tables))
	for _, t := range db.cat.Tables {
		out = append(out, tableInfo(t))
	}
	return out, nil
}

// setCatalog makes c the catalog (db.mu held exclusively, or the DB not yet shared) and
// counts the change for CatalogGeneration.
func (db *DB) setCatalog(c *catalog.Catalog) {
	db.cat = c
	db.catGen.Add(1)
}

// CatalogGeneration changes whenever the catalog does (a table or index created, dropped,
// truncated, altered or switched by VACUUM FULL): what was read of the catalog
// (Table, Tables) under one value is still current while it returns that value. Read it
// before reading the catalog, so that a change in between makes the next comparison fail.
func (db *DB) CatalogGeneration() uint64 { return db.catGen.Load() }

// Table describes the named table (ErrNoSuchTable if there is none).
func (db *DB) Table(name string) (TableInfo, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return TableInfo{}, ErrClosed
	}
	t, err := db.cat.Table(name)
	if err != nil {
		return TableInfo{}, err
	}
	return tableInfo(t), nil
}

// CreateTable creates a table with the given columns: its heap, visibility
// map and free space map files, then the catalog entry (saved atomically).
func (db *DB) CreateTable(name string, cols []Column) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.Standby {
		return ErrReadOnly
	}
	next := db.cat.Clone()
	t, err := next.AddTable(name, cols)
	if err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	// OIDs are never handed out twice, even by a failed DDL, so WAL of a
	// relation whose creation failed can never apply to another one.
	db.cat.NextOID = next.NextOID
	if err := db.logCreate(t.Rel, heapForks...); err != nil {
		return fmt.Errorf("create table %q: %w", name, err)
	}
	if err := db.createHeap(t.Rel); err != nil {
		_ = db.failIfSyncFailed(err)
		db.abandonRels("create table "+name, []storage.RelFileNode{t.Rel})
		return fmt.Errorf("create table %q: %w", name, err)
	}
	return db.switchCatalog(catalogSwitch{what: fmt.Sprintf("create table %q", name), next: next,
		created: []storage.RelFileNode{t.Rel}})
}

// CreateIndex creates a B-tree index on columns of table (in key order:
// one column, or several for a multi-column key) and fills it bottom-up
// from the table's existing rows (every version not yet dead, so that
// transactions still running find their rows too). Every column type can
// be a key column: integers and timestamps order numerically, text,
// varchar, bpchar and bytea bytewise (the "C" collation), NULL last. A row
// whose key columns are all NULL has no entry; a key longer than
// btree.MaxKeySize bytes is refused (ErrKeyTooLong).
func (db *DB) CreateIndex(name, table string, columns ...string) error {
	return db.createIndex(name, table, columns, false, false)
}

// CreateUniqueIndex is CreateIndex of a unique index: every later write
// is checked against it (ErrUniqueViolation; keys with a NULL never
// conflict), and it is refused if two rows already share a key.
func (db *DB) CreateUniqueIndex(name, table string, columns ...string) error {
	return db.createIndex(name, table, columns, true, false)
}

// AddPrimaryKey makes columns the primary key of table, as PostgreSQL's
// ALTER TABLE ... ADD PRIMARY KEY: a unique index named <table>_pkey and
// the columns declared NOT NULL, refused if a row holds NULL in one
// (ErrNotNull) or two rows share a key (ErrUniqueViolation).
func (db *DB) AddPrimaryKey(table string, columns ...string) error {
	return db.createIndex(table+"_pkey", table, columns, true, true)
}

func (db *DB) createIndex(name, table string, columns []string, unique, primary bool) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.Standby {
		return ErrReadOnly
	}
	next := db.cat.Clone()
	ix, err := next.AddIndex(name, table, columns, unique)
	if err != nil {
		return fmt.Errorf("create index: %w", err)
	}
	if primary {
		if err := next.SetNotNull(table, columns...); err != nil {
			return fmt.Errorf("add primary key: %w", err)
		}
	}
	db.cat.NextOID = next.NextOID
	t, _ := next.Table(table)
	what := fmt.Sprintf("create index %q", name)
	created := []storage.RelFileNode{ix.Rel}
	if err := db.logCreate(ix.Rel, storage.MainFork); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := db.buildIndex(context.Background(), t, ix, primary); err != nil {
		db.abandonRels(what, created)
		return fmt.Errorf("%s: %w", what, err)
	}
	// The index's pages are WAL-logged; make them durable before the
	// catalog names the index, or a crash could leave it half built.
	if err := db.log.Flush(db.log.InsertLSN(), nil); err != nil {
		db.abandonRels(what, created)
		return fmt.Errorf("%s: %w", what, err)
	}
	return db.switchCatalog(catalogSwitch{what: what, next: next, created: created})
}
