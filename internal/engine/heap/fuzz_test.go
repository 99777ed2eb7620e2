package heap

import (
	"bytes"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestTupleHeaderRoundTrip(t *testing.T) {
	h := TupleHeader{Xmin: 7, Xmax: 9, Ctid: page.TID{Block: 3, Off: 4}, Infomask: XminCommitted | Updated}
	b := EncodeTuple(h, []byte("payload"))
	got, data, err := DecodeTuple(b)
	if err != nil {
		t.Fatal(err)
	}
	h.DataLen = 7
	if got != h || string(data) != "payload" {
		t.Fatalf("decoded %+v %q, want %+v payload", got, data, h)
	}
	bad := []struct {
		name string
		mut  func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }},
		{"length mismatch", func(b []byte) []byte { return b[:len(b)-1] }},
		{"unknown infomask bit", func(b []byte) []byte { b[offInfomask+1] |= 0x80; return b }},
		{"xmin committed and invalid", func(b []byte) []byte { b[offInfomask] |= byte(XminInvalid); return b }},
		{"reserved set", func(b []byte) []byte { b[offReserved] = 1; return b }},
		{"zero xmin", func(b []byte) []byte { clear(b[offXmin : offXmin+8]); return b }},
	}
	for _, c := range bad {
		if _, _, err := DecodeTuple(c.mut(bytes.Clone(b))); err == nil {
			t.Errorf("%s: decoded without error", c.name)
		}
	}
}

func FuzzTupleHeader(f *testing.F) {
	f.Add(EncodeTuple(TupleHeader{Xmin: 3, Infomask: XmaxInvalid}, []byte("row")))
	f.Add(EncodeTuple(TupleHeader{Xmin: 3, Xmax: 5, Ctid: page.TID{Block: 1, Off: 2}, Infomask: XminCommitted | XmaxCommitted | Updated}, nil))
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := DecodeTuple(b)
		if err != nil {
			return
		}
		if again := EncodeTuple(h, data); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding changed the tuple:\n%x\n%x", b, again)
		}
		// setHints writes only the infomask: the item must be the tuple
		// re-encoded whole with the new bits, nothing else changed.
		for _, bit := range []uint16{XminCommitted, XminInvalid, XmaxCommitted, XmaxInvalid} {
			item, hh := bytes.Clone(b), h
			setHints(item, &hh, bit)
			want := h
			want.Infomask |= bit
			if !bytes.Equal(item, EncodeTuple(want, data)) {
				t.Fatalf("setHints(%#x) wrote more than the infomask:\n%x\n%x", bit, item, EncodeTuple(want, data))
			}
		}
	})
}

func FuzzHeapRecord(f *testing.F) {
	tup := EncodeTuple(TupleHeader{Xmin: 3, Infomask: XmaxInvalid}, []byte("x"))
	f.Add(InfoInsert, true, encodeInsert(1, flagInitPage, tup))
	f.Add(InfoDelete, false, encodeDelete(2, flagAllVisibleCleared))
	f.Add(InfoUpdate, true, encodeUpdateNew(3, flagSameBlock, 1, tup))
	f.Add(InfoPrune, false, encodePrune(9, []page.OffsetNumber{1, 2}))
	f.Add(InfoVacuum, false, encodeOffsets(nil, []page.OffsetNumber{4}))
	f.Add(InfoVacuumVisible, false, encodeOffsets(nil, []page.OffsetNumber{2, 5}))
	f.Add(InfoTruncate, false, encodeTruncate(16384, 3))
	np := make(page.Page, page.Size)
	page.Init(np, 0)
	_, _ = placeTuple(np, 0, tup, 0)
	f.Add(InfoNewPage, false, encodeNewPage(np))
	f.Fuzz(func(t *testing.T, info uint8, newPage bool, b []byte) {
		switch info {
		case InfoInsert, InfoDelete, InfoUpdate:
			op, err := decodeTupleOp(info, b, newPage)
			if err == nil && op.off == page.InvalidOffset {
				t.Fatal("decoded offset 0")
			}
		case InfoPrune:
			_, offs, err := decodePrune(b)
			if err == nil && !bytes.Equal(encodePrune(0, offs)[8:], b[8:]) {
				t.Fatal("prune offsets do not re-encode")
			}
		case InfoVacuum, InfoVacuumVisible:
			offs, err := decodeOffsets(info, b)
			if err == nil && !bytes.Equal(encodeOffsets(nil, offs), b) {
				t.Fatal("vacuum offsets do not re-encode")
			}
		case InfoNewPage:
			dst := make(page.Page, page.Size)
			if err := decodeNewPage(dst, b); err == nil {
				if verr := dst.Validate(); verr != nil {
					t.Fatalf("decoded page does not validate: %v", verr)
				}
				if !bytes.Equal(encodeNewPage(dst), b) {
					t.Fatal("new page does not re-encode")
				}
			}
		case InfoTruncate:
			rel, n, err := decodeTruncate(b)
			if err == nil && !bytes.Equal(encodeTruncate(rel, n), b) {
				t.Fatal("truncate record does not re-encode")
			}
		}
	})
}
