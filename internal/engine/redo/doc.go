// Package redo holds what every resource manager's redo routine shares:
// reading the block a WAL record changes, deciding whether the change is
// already on the page, and finishing the change.
//
// Invariants:
//   - Redo is idempotent by page LSN: a record whose EndLSN is <= the
//     page's LSN is already on the page and is skipped (Done); a new
//     (all-zero) page has every record still to apply.
//   - A full-page image is restored as it is, whatever the page held (even
//     a torn page that fails its checksum), and the page LSN is set to the
//     record's EndLSN.
//   - A block past the end of its fork is created by extending the fork
//     with zeroed pages (a crash may have lost the extension); a missing
//     fork file is created.
//   - Records of relations Env.Skip names are skipped: relations retired
//     from the catalog (dropped, or replaced by a VACUUM FULL or TRUNCATE)
//     and creations abandoned. A relation whose creation record replay saw
//     is not among them, even if the catalog already counts its OID (the
//     engine's catalogrec.go and relfile.go decide).
//
// This package owns no on-disk bytes.
package redo
