package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// FirstOID is the first OID handed out in a fresh catalog.
const FirstOID uint32 = 16384

// Errors callers branch on.
var (
	ErrNoSuchTable = errors.New("no such table")
	ErrNoSuchIndex = errors.New("no such index")
	ErrExists      = errors.New("name already in use")
	ErrBadDef      = errors.New("invalid definition")
)

// Index is a B-tree index on one or more columns of any type, keyed by
// package row's index keys. A row whose key columns are all NULL has no
// entry (no lookup by key matches NULL).
type Index struct {
	Name    string              `json:"name"`
	OID     uint32              `json:"oid"`
	Columns []string            `json:"columns"`
	Rel     storage.RelFileNode `json:"relfilenode"`
	// Unique: no two live rows have the same key without a NULL in it
	// (the engine checks it on every write; NULLs are distinct).
	Unique bool `json:"unique,omitempty"`
}

// UnmarshalJSON reads an index, also as earlier builds wrote it: one
// key column named by "column".
func (ix *Index) UnmarshalJSON(b []byte) error {
	type plain Index
	var v struct {
		plain
		Column string `json:"column"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*ix = Index(v.plain)
	if len(ix.Columns) == 0 && v.Column != "" {
		ix.Columns = []string{v.Column}
	}
	return nil
}

// KeyPositions returns the positions of ix's key columns in t, -1 for a
// column t does not have.
func (t *Table) KeyPositions(ix *Index) []int {
	out := make([]int, len(ix.Columns))
	for i, c := range ix.Columns {
		out[i] = t.ColumnIndex(c)
	}
	return out
}

// KeyColumns returns ix's key columns (a column t does not have is left
// zero; validate refuses such a catalog).
func (t *Table) KeyColumns(ix *Index) []row.Column {
	out := make([]row.Column, len(ix.Columns))
	for i, p := range t.KeyPositions(ix) {
		if p >= 0 {
			out[i] = t.Columns[p]
		}
	}
	return out
}

// Table is a heap table with its indexes. Its heap has a main, a visibility
// map and a free space map fork, all named by Rel.
type Table struct {
	Name    string              `json:"name"`
	OID     uint32              `json:"oid"`
	Rel     storage.RelFileNode `json:"relfilenode"`
	Columns []row.Column        `json:"columns"`
	Indexes []Index             `json:"indexes"`
	// Truncating is set while a transaction's TRUNCATE of the table is
	// open: Rel and the indexes' files are then the new, emptied ones, and
	// Truncating keeps the old ones, restored if the transaction does not
	// commit (EndTruncate; the engine's Open decides it by the commit log).
	Truncating *Truncation `json:"truncating,omitempty"`
}

// Truncation is an open transaction's TRUNCATE of a table: the
// transaction and the files the table had before it.
type Truncation struct {
	XID     uint64                         `json:"xid"`
	Rel     storage.RelFileNode            `json:"relfilenode"`
	Indexes map[string]storage.RelFileNode `json:"indexes,omitempty"`
}

// ColumnIndex returns the position of the named column, or -1.
func (t *Table) ColumnIndex(name string) int {
	return slices.IndexFunc(t.Columns, func(c row.Column) bool { return c.Name == name })
}

// Index returns the named index of t.
func (t *Table) Index(name string) (*Index, bool) {
	for i := range t.Indexes {
		if t.Indexes[i].Name == name {
			return &t.Indexes[i], true
		}
	}
	return nil, false
}

// Catalog is the set of tables. It is not safe for concurrent use: the
// engine guards it with its own lock and mutates a Clone before saving, so
// a failed Save leaves the in-memory catalog unchanged.
type Catalog struct {
	NextOID uint32   `json:"next_oid"`
	Tables  []*Table `json:"tables"`
	// Seq counts the catalog's switches: each one that reaches the disk is
	// one more, and is WAL-logged with it, so a standby's replay adopts a
	// logged catalog only when it is newer than its own (0 in catalogs
	// written before the count).
	Seq uint64 `json:"seq,omitempty"`
}

// New returns an empty catalog.
func New() *Catalog { return &Catalog{NextOID: FirstOID} }

// Clone returns a deep copy.
func (c *Catalog) Clone() *Catalog {
	n := &Catalog{NextOID: c.NextOID, Seq: c.Seq, Tables: make([]*Table, len(c.Tables))}
	for i, t := range c.Tables {
		ct := *t
		ct.Columns = slices.Clone(t.Columns)
		ct.Indexes = slices.Clone(t.Indexes)
		for j := range ct.Indexes {
			ct.Indexes[j].Columns = slices.Clone(t.Indexes[j].Columns)
		}
		if t.Truncating != nil {
			tr := *t.Truncating
			tr.Indexes = maps.Clone(t.Truncating.Indexes)
			ct.Truncating = &tr
		}
		n.Tables[i] = &ct
	}
	return n
}

// AllocOID returns a fresh OID (also used as a relfilenode).
func (c *Catalog) AllocOID() uint32 {
	if c.NextOID < FirstOID {
		c.NextOID = FirstOID
	}
	o := c.NextOID
	c.NextOID++
	return o
}

// Table returns the named table.
func (c *Catalog) Table(name string) (*Table, error) {
	for _, t := range c.Tables {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("table %q: %w", name, ErrNoSuchTable)
}

// Index returns the named index and its table.
func (c *Catalog) Index(name string) (*Table, *Index, error) {
	for _, t := range c.Tables {
		if ix, ok := t.Index(name); ok {
			return t, ix, nil
		}
	}
	return nil, nil, fmt.Errorf("index %q: %w", name, ErrNoSuchIndex)
}

func (c *Catalog) nameInUse(name string) bool {
	if _, err := c.Table(name); err == nil {
		return true
	}
	_, _, err := c.Index(name)
	return err == nil
}

// AddTable defines a table with fresh OID and relfilenode and returns it.
func (c *Catalog) AddTable(name string, cols []row.Column) (*Table, error) {
	if name == "" {
		return nil, fmt.Errorf("table name is empty: %w", ErrBadDef)
	}
	if c.nameInUse(name) {
		return nil, fmt.Errorf("table %q: %w", name, ErrExists)
	}
	if err := checkColumns(cols); err != nil {
		return nil, fmt.Errorf("table %q: %w", name, err)
	}
	t := &Table{Name: name, OID: c.AllocOID(), Columns: slices.Clone(cols)}
	t.Rel = storage.RelFileNode(c.AllocOID())
	c.Tables = append(c.Tables, t)
	return t, nil
}

func checkColumns(cols []row.Column) error {
	if len(cols) == 0 {
		return fmt.Errorf("no columns: %w", ErrBadDef)
	}
	if len(cols) > row.MaxColumns {
		return fmt.Errorf("%d columns, at most %d: %w", len(cols), row.MaxColumns, ErrBadDef)
	}
	seen := map[string]bool{}
	for _, col := range cols {
		if err := col.Validate(); err != nil {
			return fmt.Errorf("%v: %w", err, ErrBadDef)
		}
		if seen[col.Name] {
			return fmt.Errorf("column %q defined twice: %w", col.Name, ErrBadDef)
		}
		seen[col.Name] = true
	}
	return nil
}

// Indexable reports whether a B-tree index may have column c (every type
// has a B-tree order: row.Keyable).
func Indexable(c row.Column) bool { return row.Keyable(c.Type) }

// MaxIndexColumns is the most key columns an index may have (PostgreSQL's
// INDEX_MAX_KEYS).
const MaxIndexColumns = 32

// AddIndex defines an index (unique or not) on columns of table, in key
// order, and returns it.
func (c *Catalog) AddIndex(name, table string, columns []string, unique bool) (*Index, error) {
	t, err := c.Table(table)
	if err != nil {
		return nil, err
	}
	if t.Truncating != nil {
		return nil, fmt.Errorf("index %q: table %q has an open TRUNCATE: %w", name, table, ErrBadDef)
	}
	if name == "" {
		return nil, fmt.Errorf("index name is empty: %w", ErrBadDef)
	}
	if c.nameInUse(name) {
		return nil, fmt.Errorf("index %q: %w", name, ErrExists)
	}
	if err := checkKeyColumns(t, columns); err != nil {
		return nil, fmt.Errorf("index %q: %w", name, err)
	}
	ix := Index{Name: name, OID: c.AllocOID(), Columns: slices.Clone(columns), Unique: unique}
	ix.Rel = storage.RelFileNode(c.AllocOID())
	t.Indexes = append(t.Indexes, ix)
	return &t.Indexes[len(t.Indexes)-1], nil
}

func checkKeyColumns(t *Table, columns []string) error {
	if len(columns) == 0 || len(columns) > MaxIndexColumns {
		return fmt.Errorf("%d key columns, want 1 to %d: %w", len(columns), MaxIndexColumns, ErrBadDef)
	}
	for i, col := range columns {
		ci := t.ColumnIndex(col)
		if ci < 0 {
			return fmt.Errorf("table %q has no column %q: %w", t.Name, col, ErrBadDef)
		}
		if !Indexable(t.Columns[ci]) {
			return fmt.Errorf("column %q is %s, which has no B-tree order: %w", col, t.Columns[ci].TypeName(), ErrBadDef)
		}
		if slices.Contains(columns[:i], col) {
			return fmt.Errorf("column %q named twice in the key: %w", col, ErrBadDef)
		}
	}
	return nil
}

// RemoveTable removes the named table and its indexes (DROP TABLE) and
// returns their relfilenodes, heap first, whose files the caller removes
// once the catalog is saved.
func (c *Catalog) RemoveTable(name string) ([]storage.RelFileNode, error) {
	i := slices.IndexFunc(c.Tables, func(t *Table) bool { return t.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("table %q: %w", name, ErrNoSuchTable)
	}
	t := c.Tables[i]
	rels := []storage.RelFileNode{t.Rel}
	for _, ix := range t.Indexes {
		rels = append(rels, ix.Rel)
	}
	c.Tables = slices.Delete(c.Tables, i, i+1)
	return rels, nil
}

// SetNotNull declares columns of table NOT NULL (ADD PRIMARY KEY; the
// caller has checked that no row holds NULL there).
func (c *Catalog) SetNotNull(table string, columns ...string) error {
	t, err := c.Table(table)
	if err != nil {
		return err
	}
	for _, column := range columns {
		ci := t.ColumnIndex(column)
		if ci < 0 {
			return fmt.Errorf("table %q has no column %q: %w", table, column, ErrBadDef)
		}
		t.Columns[ci].NotNull = true
	}
	return nil
}

// SwapRelfilenodes points table's heap at newHeap and each index named in
// newIndexes at its new relfilenode (VACUUM FULL's switch). Every index of
// the table must be named. It returns the old relfilenodes (heap first),
// whose files the caller removes after saving the catalog.
func (c *Catalog) SwapRelfilenodes(table string, newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) ([]storage.RelFileNode, error) {
	t, err := c.Table(table)
	if err != nil {
		return nil, err
	}
	if len(newIndexes) != len(t.Indexes) {
		return nil, fmt.Errorf("swap %q: %d new index files for %d indexes: %w", table, len(newIndexes), len(t.Indexes), ErrBadDef)
	}
	for _, ix := range t.Indexes {
		if _, ok := newIndexes[ix.Name]; !ok {
			return nil, fmt.Errorf("swap %q: no new file for index %q: %w", table, ix.Name, ErrBadDef)
		}
	}
	old := []storage.RelFileNode{t.Rel}
	t.Rel = newHeap
	for i := range t.Indexes {
		old = append(old, t.Indexes[i].Rel)
		t.Indexes[i].Rel = newIndexes[t.Indexes[i].Name]
	}
	return old, nil
}

// Rels returns every relfilenode the catalog references, the files an
// open TRUNCATE keeps (Table.Truncating) included.
func (c *Catalog) Rels() map[storage.RelFileNode]bool {
	m := map[storage.RelFileNode]bool{}
	for _, t := range c.Tables {
		m[t.Rel] = true
		for _, ix := range t.Indexes {
			m[ix.Rel] = true
		}
		if t.Truncating != nil {
			m[t.Truncating.Rel] = true
			for _, r := range t.Truncating.Indexes {
				m[r] = true
			}
		}
	}
	return m
}

// BeginTruncate points table at the new, empty files (as
// SwapRelfilenodes) for transaction xid's TRUNCATE, keeping the old ones
// in Table.Truncating. A second TRUNCATE by the same transaction keeps the
// first one's old files and returns the files it replaces (the
// transaction's own, which the caller removes after saving); another
// transaction's open TRUNCATE is an error.
func (c *Catalog) BeginTruncate(table string, xid uint64, newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) ([]storage.RelFileNode, error) {
	t, err := c.Table(table)
	if err != nil {
		return nil, err
	}
	prev := t.Truncating
	if prev != nil && prev.XID != xid {
		return nil, fmt.Errorf("truncate %q: transaction %d has an open TRUNCATE of it: %w", table, prev.XID, ErrBadDef)
	}
	old, err := c.SwapRelfilenodes(table, newHeap, newIndexes)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		return old, nil
	}
	tr := &Truncation{XID: xid, Rel: old[0], Indexes: map[string]storage.RelFileNode{}}
	for i, ix := range t.Indexes {
		tr.Indexes[ix.Name] = old[i+1]
	}
	t.Truncating = tr
	return nil, nil
}

// EndTruncate ends table's open TRUNCATE: committed keeps the new files,
// otherwise the old ones come back. It returns the files no longer named
// (the old ones, or the new ones), for the caller to remove after saving.
func (c *Catalog) EndTruncate(table string, committed bool) ([]storage.RelFileNode, error) {
	t, err := c.Table(table)
	if err != nil {
		return nil, err
	}
	tr := t.Truncating
	if tr == nil {
		return nil, fmt.Errorf("end truncate %q: no open TRUNCATE: %w", table, ErrBadDef)
	}
	t.Truncating = nil
	if committed {
		out := []storage.RelFileNode{tr.Rel}
		for _, ix := range t.Indexes {
			out = append(out, tr.Indexes[ix.Name])
		}
		return out, nil
	}
	out := []storage.RelFileNode{t.Rel}
	t.Rel = tr.Rel
	for i := range t.Indexes {
		out = append(out, t.Indexes[i].Rel)
		t.Indexes[i].Rel = tr.Indexes[t.Indexes[i].Name]
	}
	return out, nil
}

// validate checks the invariants listed in the package doc.
func (c *Catalog) validate() error {
	used := map[uint32]bool{}
	names := map[string]bool{}
	id := func(what string, v uint32) error {
		if v == 0 || v >= c.NextOID {
			return fmt.Errorf("%s %d outside [1, next %d)", what, v, c.NextOID)
		}
		if used[v] {
			return fmt.Errorf("%s %d used twice", what, v)
		}
		used[v] = true
		return nil
	}
	name := func(n string) error {
		if n == "" || names[n] {
			return fmt.Errorf("name %q empty or used twice", n)
		}
		names[n] = true
		return nil
	}
	for _, t := range c.Tables {
		if t == nil {
			return errors.New("null table")
		}
		if err := name(t.Name); err != nil {
			return err
		}
		if err := checkColumns(t.Columns); err != nil {
			return fmt.Errorf("table %q: %w", t.Name, err)
		}
		if err := id("oid", t.OID); err != nil {
			return err
		}
		if err := id("relfilenode", uint32(t.Rel)); err != nil {
			return err
		}
		for _, ix := range t.Indexes {
			if err := name(ix.Name); err != nil {
				return err
			}
			if err := checkKeyColumns(t, ix.Columns); err != nil {
				return fmt.Errorf("index %q: %w", ix.Name, err)
			}
			if err := id("oid", ix.OID); err != nil {
				return err
			}
			if err := id("relfilenode", uint32(ix.Rel)); err != nil {
				return err
			}
		}
		if tr := t.Truncating; tr != nil {
			if err := id("relfilenode", uint32(tr.Rel)); err != nil {
				return err
			}
			if len(tr.Indexes) != len(t.Indexes) {
				return fmt.Errorf("table %q: open TRUNCATE keeps %d index files for %d indexes", t.Name, len(tr.Indexes), len(t.Indexes))
			}
			for _, ix := range t.Indexes {
				r, ok := tr.Indexes[ix.Name]
				if !ok {
					return fmt.Errorf("table %q: open TRUNCATE keeps no file of index %q", t.Name, ix.Name)
				}
				if err := id("relfilenode", uint32(r)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
