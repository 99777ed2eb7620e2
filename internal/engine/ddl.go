package engine

import (
	"context"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Column is one column of a table: a name and a type (Int64 or Bytes).
type Column = row.Column

// ColumnType is a column's type.
type ColumnType = row.Type

// Column types.
const (
	Int64 = row.Int64
	Bytes = row.Bytes
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
	Name        string
	OID         uint32
	Column      string
	Relfilenode storage.RelFileNode
}

func tableInfo(t *catalog.Table) TableInfo {
	ti := TableInfo{Name: t.Name, OID: t.OID, Relfilenode: t.Rel, Columns: append([]Column(nil), t.Columns...)}
	for _, ix := range t.Indexes {
		ti.Indexes = append(ti.Indexes, IndexInfo{Name: ix.Name, OID: ix.OID, Column: ix.Column, Relfilenode: ix.Rel})
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
	next := db.cat.Clone()
	t, err := next.AddTable(name, cols)
	if err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	// OIDs are never handed out twice, even by a failed DDL, so WAL of a
	// relation whose creation failed can never apply to another one.
	db.cat.NextOID = next.NextOID
	if err := db.createHeap(t.Rel); err != nil {
		_ = db.failIfSyncFailed(err)
		db.dropRels("create table "+name, []storage.RelFileNode{t.Rel})
		return fmt.Errorf("create table %q: %w", name, err)
	}
	return db.switchCatalog(catalogSwitch{what: fmt.Sprintf("create table %q", name), next: next,
		created: []storage.RelFileNode{t.Rel}})
}

// CreateIndex creates a B-tree index on an int64 column of table and fills
// it from the table's existing rows (every version not yet dead, so that
// transactions still running find their rows too).
func (db *DB) CreateIndex(name, table, column string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	next := db.cat.Clone()
	ix, err := next.AddIndex(name, table, column)
	if err != nil {
		return fmt.Errorf("create index: %w", err)
	}
	db.cat.NextOID = next.NextOID
	t, _ := next.Table(table)
	what := fmt.Sprintf("create index %q", name)
	created := []storage.RelFileNode{ix.Rel}
	if err := db.buildIndex(context.Background(), t, ix); err != nil {
		db.dropRels(what, created)
		return fmt.Errorf("%s: %w", what, err)
	}
	// The index's pages are WAL-logged; make them durable before the
	// catalog names the index, or a crash could leave it half built.
	if err := db.log.Flush(db.log.InsertLSN(), nil); err != nil {
		db.dropRels(what, created)
		return fmt.Errorf("%s: %w", what, err)
	}
	return db.switchCatalog(catalogSwitch{what: what, next: next, created: created})
}
