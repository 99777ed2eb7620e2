// Package catalog is the engine's system catalog: the tables, their typed
// columns, their B-tree indexes, and the relfilenode (file name) of each
// relation. It is small and lives in memory; the engine saves it after
// every DDL change (CREATE, DROP, TRUNCATE) and at VACUUM FULL's switch.
//
// File <dir>/catalog, replaced atomically by Save (write <dir>/catalog.tmp,
// fsync it, rename it over <dir>/catalog, fsync <dir>), so a crash leaves
// either the old catalog or the new one, never a mix. Byte layout (little
// endian):
//
//	offset 0  [4]byte  magic "VCAT"
//	offset 4  uint32   format version (Version)
//	offset 8  uint32   payload length n
//	offset 12 uint32   CRC32C (Castagnoli) of the payload
//	offset 16 [n]byte  payload: JSON of Catalog
//
// Version 3 (this build) gives an index a list of key columns
// ("columns") of any type. Version 2 named column types as PostgreSQL does
// (int8, bytea, varchar with a length, ...; package row) and records NOT
// NULL, and gave an index one integer key column ("column"). Version 1
// named the two types of its time int64 and bytes. Decode refuses older
// versions (ErrUnsupportedVersion); DecodeV1 and DecodeV2 read them for
// the upgrade.
//
// Invariants checked by Decode (a violation is ErrCorrupt): names of
// tables and of indexes are unique and non-empty; column types are known;
// an index has 1 to MaxIndexColumns key columns, each once, each existing
// in its table (Indexable); every OID and
// relfilenode is non-zero, below NextOID, and used once. Decode never
// panics on arbitrary bytes (FuzzCatalogDecode).
//
// OIDs and relfilenodes come from one counter, NextOID. A relfilenode is
// never reused while WAL may still mention it: the engine persists NextOID
// in the control file at each checkpoint and takes the larger of the two
// at open.
package catalog
