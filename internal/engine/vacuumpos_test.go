package engine

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

func TestPositionRoundTripsAndRefusesDamage(t *testing.T) {
	p := savedPosition{Rel: 16390, Pos: vacuum.Position{Block: 7, Blocks: 9, Horizon: 1234}, LSN: 0xABCDEF}
	b := encodePosition(p)
	got, err := decodePosition(b)
	if err != nil || got != p {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", p, got, err)
	}
	for i := range b {
		d := append([]byte(nil), b...)
		d[i] ^= 0x40
		if _, err := decodePosition(d); err == nil {
			t.Errorf("a flipped bit in byte %d was not noticed", i)
		}
	}
	if _, err := decodePosition(b[:len(b)-1]); err == nil {
		t.Error("a short file was accepted")
	}
}

func FuzzDecodePosition(f *testing.F) {
	f.Add(encodePosition(savedPosition{Rel: 5, Pos: vacuum.Position{Block: 3, Blocks: 3, Finished: true}}))
	f.Add([]byte("VPOS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePosition(b)
		if err != nil {
			return
		}
		if p.Pos.Block > p.Pos.Blocks {
			t.Fatalf("decoded block %d beyond %d blocks", p.Pos.Block, p.Pos.Blocks)
		}
		if again, err := decodePosition(encodePosition(p)); err != nil || again != p {
			t.Fatalf("re-encoding %+v gives %+v, %v", p, again, err)
		}
	})
}
