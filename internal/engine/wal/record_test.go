package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// testPage returns an initialised page holding n items of 100 bytes each
// (distinct contents), with page LSN lsn.
func testPage(t testing.TB, n int, lsn uint64) page.Page {
	t.Helper()
	p := page.Page(make([]byte, page.Size))
	page.Init(p, 16)
	for i := range n {
		item := bytes.Repeat([]byte{byte(i + 1)}, 100)
		if _, err := p.AddItem(item, page.InvalidOffset); err != nil {
			t.Fatalf("add item %d: %v", i, err)
		}
	}
	copy(p.Special(), "special!")
	p.SetLSN(lsn)
	return p
}

// fullPage returns a page with no zero run anywhere.
func fullPage() []byte {
	b := make([]byte, page.Size)
	for i := range b {
		b[i] = byte(i%251) + 1
	}
	return b
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	pg := testPage(t, 5, 77)
	cases := []struct {
		name string
		rec  Record
	}{
		{"empty main, no blocks", Record{Rmgr: RmgrXact, Info: 1, XID: 9}},
		{"main only", Record{Rmgr: RmgrXLOG, Info: 2, Main: []byte("checkpoint payload"), PrevLSN: 1234}},
		{"block with data", Record{Rmgr: RmgrHeap, XID: 1 << 40, Blocks: []BlockRef{
			{Rel: 16384, Fork: storage.MainFork, Block: 7, Data: []byte{1, 2, 3}},
		}, Main: []byte{9}}},
		{"block with hole-compressed image", Record{Rmgr: RmgrHeap, Blocks: []BlockRef{
			{Rel: 1, Block: 2, Image: pg, Data: []byte("redo")},
		}}},
		{"image without hole", Record{Rmgr: RmgrBtree, Blocks: []BlockRef{
			{Rel: 1, Fork: storage.VMFork, Block: 3, Image: fullPage()},
		}}},
		{"image of a new page", Record{Rmgr: RmgrXLOG, Blocks: []BlockRef{
			{Rel: 1, Block: 4, Image: make([]byte, page.Size)},
		}}},
		{"multi-block, will-init, mixed", Record{Rmgr: RmgrBtree, Info: 3, XID: 5, Blocks: []BlockRef{
			{Rel: 10, Block: 0, WillInit: true, Data: []byte("init me")},
			{Rel: 10, Block: 1, Image: pg},
			{Rel: 11, Fork: storage.FSMFork, Block: 2},
		}, Main: bytes.Repeat([]byte("m"), 1000)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := Encode(&tc.rec)
			got, n, err := Decode(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if n != len(b) {
				t.Fatalf("consumed %d of %d bytes", n, len(b))
			}
			assertSameRecord(t, &tc.rec, got)
		})
	}
}

func assertSameRecord(t *testing.T, want, got *Record) {
	t.Helper()
	if got.Rmgr != want.Rmgr || got.Info != want.Info || got.XID != want.XID || got.PrevLSN != want.PrevLSN {
		t.Fatalf("header: got rmgr %d info %d xid %d prev %d, want %d %d %d %d",
			got.Rmgr, got.Info, got.XID, got.PrevLSN, want.Rmgr, want.Info, want.XID, want.PrevLSN)
	}
	if !bytes.Equal(got.Main, want.Main) {
		t.Fatalf("main: got %d bytes, want %d", len(got.Main), len(want.Main))
	}
	if len(got.Blocks) != len(want.Blocks) {
		t.Fatalf("got %d blocks, want %d", len(got.Blocks), len(want.Blocks))
	}
	for i := range want.Blocks {
		w, g := want.Blocks[i], got.Blocks[i]
		if g.Rel != w.Rel || g.Fork != w.Fork || g.Block != w.Block || g.WillInit != w.WillInit {
			t.Fatalf("block %d: got %+v, want %+v", i, g, w)
		}
		if !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("block %d data: got %q, want %q", i, g.Data, w.Data)
		}
		if (g.Image == nil) != (w.Image == nil) || !bytes.Equal(g.Image, w.Image) {
			t.Fatalf("block %d image differs (got %d bytes, want %d)", i, len(g.Image), len(w.Image))
		}
	}
}

func TestEncodeOmitsThePageHole(t *testing.T) {
	pg := testPage(t, 3, 1)
	hole := pg.Upper() - pg.Lower()
	withImage := Encode(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Image: pg}}})
	noImage := Encode(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{}}})
	if got, want := len(withImage)-len(noImage), imageHeaderSize+page.Size-hole; got != want {
		t.Fatalf("image costs %d bytes, want %d (page minus its %d-byte hole)", got, want, hole)
	}
	newPage := Encode(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Image: make([]byte, page.Size)}}})
	if got := len(newPage) - len(noImage); got != imageHeaderSize {
		t.Fatalf("an all-zero page image costs %d bytes, want %d", got, imageHeaderSize)
	}
}

func TestEncodeKeepsANonZeroHole(t *testing.T) {
	pg := testPage(t, 3, 1)
	pg[pg.Lower()+10] = 0xAB // garbage in the free space must survive
	rec, _, err := Decode(Encode(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Image: pg}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Blocks[0].Image, pg) {
		t.Fatal("image with a non-zero hole was not restored exactly")
	}
}

func TestDecodeRejectsDamage(t *testing.T) {
	good := Encode(&Record{Rmgr: RmgrHeap, XID: 3, Blocks: []BlockRef{
		{Rel: 1, Block: 2, Data: []byte("abc"), Image: testPage(t, 2, 5)},
	}, Main: []byte("main")})
	le := binary.LittleEndian
	// reseal recomputes the CRC so that structural checks are reached.
	reseal := func(b []byte) []byte {
		le.PutUint32(b[offRecCRC:], crcOf(b))
		return b
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", good[:10]},
		{"truncated", good[:len(good)-1]},
		{"length too small", mutate(func(b []byte) []byte { le.PutUint32(b, 3); return b })},
		{"length too large", mutate(func(b []byte) []byte { le.PutUint32(b, MaxRecordSize+1); return b })},
		{"flipped bit", mutate(func(b []byte) []byte { b[40] ^= 1; return b })},
		{"rmgr zero", mutate(func(b []byte) []byte { b[offRecRmgr] = 0; return reseal(b) })},
		{"unknown record flags", mutate(func(b []byte) []byte { b[offRecFlags] = 0x80; return reseal(b) })},
		{"too many blocks", mutate(func(b []byte) []byte { b[offRecNBlocks] = 2; return reseal(b) })},
		{"unknown block flags", mutate(func(b []byte) []byte { b[recHeaderSize+5] |= 0x40; return reseal(b) })},
		{"data flag without data", mutate(func(b []byte) []byte {
			b[recHeaderSize+5] &^= bkpHasData
			return reseal(b)
		})},
		{"image length and hole disagree", mutate(func(b []byte) []byte {
			le.PutUint16(b[recHeaderSize+blockHeaderSize+4:], 1)
			return reseal(b)
		})},
		{"main length wrong", mutate(func(b []byte) []byte {
			le.PutUint32(b[len(b)-4-mainLenSize:], 5)
			return reseal(b)
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, _, err := Decode(tc.b)
			if !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("got record %v, err %v; want ErrInvalidRecord", rec, err)
			}
		})
	}
}

func crcOf(b []byte) uint32 {
	return page.CRC32C(b[offRecPrev:])
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 4 {
		data := make([]byte, r.IntN(50))
		for j := range data {
			data[j] = byte(r.IntN(256))
		}
		f.Add(Encode(&Record{Rmgr: RmgrHeap, XID: uint64(i), PrevLSN: LSN(i * 100), Main: data,
			Blocks: []BlockRef{{Rel: 1, Block: storage.BlockNumber(i), Data: data}}}))
	}
	// The engine's relation file records (engine/relfile.go): a storage create of
	// relation 16390's VM fork, an abandon of relation 16391 (Main: relfilenode u32
	// little-endian, fork u8), and the end-of-recovery record (no Main).
	f.Add(Encode(&Record{Rmgr: RmgrStorage, Info: 0x10, PrevLSN: 40, Main: []byte{0x06, 0x40, 0, 0, 2}}))
	f.Add(Encode(&Record{Rmgr: RmgrStorage, Info: 0x20, PrevLSN: 40, Main: []byte{0x07, 0x40, 0, 0, 0}}))
	f.Add(Encode(&Record{Rmgr: RmgrXLOG, Info: 0x03, PrevLSN: 40}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, n, err := Decode(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		again := Encode(rec)
		back, _, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		assertSameRecord(t, rec, back)
		for i, blk := range rec.Blocks {
			if blk.Image != nil && len(blk.Image) != page.Size {
				t.Fatalf("block %d: image of %d bytes", i, len(blk.Image))
			}
		}
	})
}
