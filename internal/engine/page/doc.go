// Package page owns the 8 KiB slotted page, modeled on PostgreSQL's
// bufpage.c. Every relation block (heap, B-tree, visibility map, free space
// map) is one Page of Size bytes.
//
// # Byte layout (all integers little-endian)
//
//	offset size field
//	     0    8 LSN            end LSN of the last WAL record that changed the page
//	     8    4 checksum       CRC32C, see below
//	    12    2 flags          FlagAllVisible, FlagHasFreeLines
//	    14    2 lower          end of the line-pointer array (first free byte)
//	    16    2 upper          start of the tuple area (last free byte + 1)
//	    18    2 special        start of the special space
//	    20    2 version        LayoutVersion
//	    22    2 reserved       zero
//	    24    8 prune xid      oldest xid that may make a tuple prunable (0 = none)
//	    32      line pointers  4 bytes each, OffsetNumber 1 at byte 32
//	 lower      free space
//	 upper      items, growing down towards lower, each MAXALIGNed (8 bytes)
//	special     special space (size a multiple of 8), up to Size
//
// A line pointer is one little-endian uint32:
//
//	bits  0..14  offset of the item in the page (15 bits)
//	bits 15..16  state: 0 unused, 1 normal, 2 redirect, 3 dead
//	bits 17..31  length of the item in bytes (15 bits)
//
// A normal pointer has length > 0 and its item lies in [upper, special),
// starts on an 8-byte boundary and overlaps no other normal item. A redirect
// pointer keeps its target OffsetNumber in the offset bits and has length 0;
// its target is a normal item (as in a pruned HOT chain).
// Dead and unused pointers have offset and length 0 (their storage is
// garbage until the next Compact reclaims it).
//
// # Invariants checked by Validate
//
//	HeaderSize <= lower <= upper <= special <= Size
//	(lower - HeaderSize) % 4 == 0, special % 8 == 0, version == LayoutVersion
//	each normal item inside [upper, special), aligned, no overlap
//	each redirect target in 1..NumItems, not itself, and a normal item
//
// An all-zero page is "new" (never initialized): it is valid, its checksum
// verifies for every block, and it has no items.
//
// # Checksum
//
// CRC32C (Castagnoli) over the Size bytes of the page with the checksum
// field taken as zero, continued over the block number (uint32
// little-endian). Mixing in the block number catches a page written to, or
// read from, the wrong place. The storage manager sets the checksum on a
// private copy when writing and verifies it when reading; pages in memory
// carry stale checksums.
//
// # Safety
//
// Methods never panic: on a Page of the wrong length or with an
// inconsistent header they return zero values, nil or an error. Only a page
// that passes Validate is guaranteed to give meaningful answers.
package page
