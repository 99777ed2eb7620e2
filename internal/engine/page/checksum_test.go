package page

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func filledPage(t *testing.T) Page {
	t.Helper()
	p := newPage(t, 16)
	p.SetLSN(0xDEADBEEF)
	r := rand.New(rand.NewPCG(1, 2))
	for p.FreeSpace() > 200 {
		d := make([]byte, 1+r.IntN(150))
		for i := range d {
			d[i] = byte(r.Uint32())
		}
		if _, err := p.AddItem(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestChecksumRoundTrip(t *testing.T) {
	p := filledPage(t)
	SetChecksum(p, 42)
	if err := VerifyChecksum(p, 42); err != nil {
		t.Fatalf("VerifyChecksum after SetChecksum: %v", err)
	}
	if p.Checksum() == 0 {
		t.Fatal("checksum field not set")
	}
}

func TestChecksumDetectsEverySingleBitFlip(t *testing.T) {
	p := filledPage(t)
	SetChecksum(p, 7)
	r := rand.New(rand.NewPCG(3, 4))
	positions := []int{0, 7, 8, 11, 12, 31, 32, Size / 2, Size - 1}
	for range 500 {
		positions = append(positions, r.IntN(Size))
	}
	for _, pos := range positions {
		for _, bit := range []uint{0, 3, 7} {
			q := append(Page(nil), p...)
			q[pos] ^= 1 << bit
			err := VerifyChecksum(q, 7)
			var ce *ChecksumError
			if !errors.As(err, &ce) {
				t.Fatalf("flip of byte %d bit %d not detected: err=%v", pos, bit, err)
			}
		}
	}
}

func TestChecksumDetectsWrongBlockNumber(t *testing.T) {
	p := filledPage(t)
	SetChecksum(p, 100)
	for _, blk := range []uint32{0, 99, 101, 1 << 31, 0xFFFFFFFF} {
		err := VerifyChecksum(p, blk)
		if err == nil {
			t.Fatalf("page written as block 100 verified as block %d", blk)
		}
		if !strings.Contains(err.Error(), "block") {
			t.Errorf("error does not name the block: %v", err)
		}
	}
}

func TestAllZeroPageVerifiesForAnyBlock(t *testing.T) {
	z := make(Page, Size)
	for _, blk := range []uint32{0, 1, 12345} {
		if err := VerifyChecksum(z, blk); err != nil {
			t.Fatalf("zero page block %d: %v", blk, err)
		}
	}
	if err := z.Validate(); err != nil {
		t.Fatalf("zero page Validate: %v", err)
	}
	z[Size-1] = 1
	if err := VerifyChecksum(z, 0); err == nil {
		t.Fatal("zero page with one stray byte verified")
	}
	if err := VerifyChecksum(make(Page, 100), 0); err == nil {
		t.Fatal("short page verified")
	}
}

func TestSetChecksumIgnoresStaleChecksumField(t *testing.T) {
	p := filledPage(t)
	SetChecksum(p, 5)
	first := p.Checksum()
	SetChecksum(p, 5)
	if p.Checksum() != first {
		t.Fatalf("checksum depends on the previous checksum field: %08x vs %08x", first, p.Checksum())
	}
}
