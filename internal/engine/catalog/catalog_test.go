package catalog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

func sample(t *testing.T) *Catalog {
	t.Helper()
	c := New()
	if _, err := c.AddTable("accounts", []row.Column{{Name: "id", Type: row.Int8}, {Name: "owner", Type: row.Bytea}, {Name: "balance", Type: row.Int8}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddIndex("accounts_id", "accounts", []string{"id"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddIndex("accounts_balance", "accounts", []string{"balance"}, false); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSaveThenLoadReturnsTheSameCatalog(t *testing.T) {
	dir := t.TempDir()
	c := sample(t)
	if err := Save(vfs.OS(), dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := Load(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("loaded %+v, saved %+v", got, c)
	}
	if _, err := os.Stat(filepath.Join(dir, tmpName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestLoadOfMissingCatalogSaysNotExist(t *testing.T) {
	if _, err := Load(vfs.OS(), t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotExist", err)
	}
}

func TestLoadDetectsDamage(t *testing.T) {
	good, err := Encode(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte { b := append([]byte{}, good...); b[i] ^= 0x10; return b }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"bit flip in payload", flip(len(good) - 5), ErrCorrupt},
		{"bit flip in magic", flip(0), ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"future version", flip(4), ErrUnsupportedVersion},
		{"empty", nil, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileName), c.b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(vfs.OS(), dir); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestDefinitionsAreChecked(t *testing.T) {
	c := sample(t)
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"duplicate table", func() error { _, err := c.AddTable("accounts", []row.Column{{Name: "a", Type: row.Int8}}); return err }, ErrExists},
		{"table named like an index", func() error {
			_, err := c.AddTable("accounts_id", []row.Column{{Name: "a", Type: row.Int8}})
			return err
		}, ErrExists},
		{"no columns", func() error { _, err := c.AddTable("t", nil); return err }, ErrBadDef},
		{"duplicate column", func() error {
			_, err := c.AddTable("t", []row.Column{{Name: "a", Type: row.Int8}, {Name: "a", Type: row.Bytea}})
			return err
		}, ErrBadDef},
		{"unknown type", func() error { _, err := c.AddTable("t", []row.Column{{Name: "a", Type: 99}}); return err }, ErrBadDef},
		{"char without length", func() error {
			_, err := c.AddTable("t", []row.Column{{Name: "a", Type: row.Bpchar}})
			return err
		}, ErrBadDef},
		{"length on int8", func() error {
			_, err := c.AddTable("t", []row.Column{{Name: "a", Type: row.Int8, Length: 4}})
			return err
		}, ErrBadDef},
		{"index on no column", func() error { _, err := c.AddIndex("ix", "accounts", nil, false); return err }, ErrBadDef},
		{"index naming a column twice", func() error { _, err := c.AddIndex("ix", "accounts", []string{"id", "id"}, false); return err }, ErrBadDef},
		{"index on missing column", func() error { _, err := c.AddIndex("ix", "accounts", []string{"nope"}, false); return err }, ErrBadDef},
		{"index on missing table", func() error { _, err := c.AddIndex("ix", "nope", []string{"id"}, false); return err }, ErrNoSuchTable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := c.Table("nope"); !errors.Is(err, ErrNoSuchTable) {
		t.Fatalf("lookup of missing table: %v", err)
	}
	if _, _, err := c.Index("nope"); !errors.Is(err, ErrNoSuchIndex) {
		t.Fatalf("lookup of missing index: %v", err)
	}
}

func TestSwapRelfilenodesSwitchesHeapAndEveryIndex(t *testing.T) {
	c := sample(t)
	tb, _ := c.Table("accounts")
	oldHeap := tb.Rel
	oldIx := []storage.RelFileNode{tb.Indexes[0].Rel, tb.Indexes[1].Rel}
	h, i1, i2 := storage.RelFileNode(c.AllocOID()), storage.RelFileNode(c.AllocOID()), storage.RelFileNode(c.AllocOID())

	if _, err := c.SwapRelfilenodes("accounts", h, map[string]storage.RelFileNode{"accounts_id": i1}); !errors.Is(err, ErrBadDef) {
		t.Fatalf("partial swap accepted: %v", err)
	}
	old, err := c.SwapRelfilenodes("accounts", h, map[string]storage.RelFileNode{"accounts_id": i1, "accounts_balance": i2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []storage.RelFileNode{oldHeap, oldIx[0], oldIx[1]}; !reflect.DeepEqual(old, want) {
		t.Fatalf("old = %v, want %v", old, want)
	}
	tb, _ = c.Table("accounts")
	if tb.Rel != h || tb.Indexes[0].Rel != i1 || tb.Indexes[1].Rel != i2 {
		t.Fatalf("after swap: %+v", tb)
	}
	rels := c.Rels()
	if rels[oldHeap] || !rels[h] || len(rels) != 3 {
		t.Fatalf("Rels = %v", rels)
	}
}

func TestCloneIsIndependent(t *testing.T) {
	c := sample(t)
	d := c.Clone()
	if _, err := d.AddIndex("another", "accounts", []string{"id"}, false); err != nil {
		t.Fatal(err)
	}
	tb, _ := c.Table("accounts")
	if len(tb.Indexes) != 2 || c.NextOID == d.NextOID {
		t.Fatal("clone shares state with the original")
	}
}

func FuzzCatalogDecode(f *testing.F) {
	c := New()
	_, _ = c.AddTable("t", []row.Column{{Name: "id", Type: row.Int8, NotNull: true}, {Name: "b", Type: row.Bytea},
		{Name: "v", Type: row.Varchar, Length: 8}, {Name: "c", Type: row.Bpchar, Length: 2}})
	_, _ = c.AddIndex("t_id", "t", []string{"id"}, false)
	good, _ := Encode(c)
	f.Add(good)
	empty, _ := Encode(New())
	f.Add(empty)
	f.Add([]byte("VCAT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("valid catalog does not re-decode: %v", err)
		}
	})
}

func TestDecodeV1RenamesTypesAndKeepsEverythingElse(t *testing.T) {
	payload := []byte(`{"next_oid":16388,"tables":[{"name":"accounts","oid":16384,"relfilenode":16385,` +
		`"columns":[{"name":"id","type":"int64"},{"name":"owner","type":"bytes"}],` +
		`"indexes":[{"name":"accounts_id","oid":16386,"column":"id","relfilenode":16387}]}]}`)
	b := make([]byte, headerSize, headerSize+len(payload))
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[4:], 1)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[12:], page.CRC32C(payload))
	b = append(b, payload...)
	if _, err := Decode(b); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Decode of format 1: %v, want ErrUnsupportedVersion", err)
	}
	c, err := DecodeV1(b)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := c.Table("accounts")
	if err != nil {
		t.Fatal(err)
	}
	want := []row.Column{{Name: "id", Type: row.Int8}, {Name: "owner", Type: row.Bytea}}
	if !reflect.DeepEqual(tb.Columns, want) || tb.Rel != 16385 || c.NextOID != 16388 ||
		len(tb.Indexes) != 1 || tb.Indexes[0].Rel != 16387 {
		t.Fatalf("upgraded catalog %+v", tb)
	}
	again, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(again); err != nil {
		t.Fatalf("upgraded catalog does not decode in this format: %v", err)
	}
	b[len(b)-2] ^= 1
	if _, err := DecodeV1(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged format-1 catalog: %v, want ErrCorrupt", err)
	}
}

func TestAnIndexWrittenWithOneColumnFieldReadsAsItsKey(t *testing.T) {
	var ix Index
	if err := json.Unmarshal([]byte(`{"name":"t_id","oid":16386,"column":"id","relfilenode":16387,"unique":true}`), &ix); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ix.Columns, []string{"id"}) || ix.Name != "t_id" || !ix.Unique || ix.Rel != 16387 {
		t.Fatalf("read %+v", ix)
	}
}
