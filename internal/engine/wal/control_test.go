package wal

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

func sampleControl() *Control {
	return &Control{Version: 3, State: StateInProduction, CheckpointLSN: 0x1234_5678_9A,
		RedoLSN: 0x1234_0000_00, NextXID: 1 << 50, NextOID: 16384}
}

func TestControlFileRoundTripAndReplace(t *testing.T) {
	dir := t.TempDir()
	c := sampleControl()
	if err := WriteControl(vfs.OS(), dir, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *c {
		t.Fatalf("read %+v, wrote %+v", got, c)
	}
	c.State, c.NextXID = StateShutdown, c.NextXID+10
	if err := WriteControl(vfs.OS(), dir, c); err != nil {
		t.Fatal(err)
	}
	if got, err = ReadControl(vfs.OS(), dir); err != nil || *got != *c {
		t.Fatalf("after replace read %+v (%v), want %+v", got, err, c)
	}
	if _, err := os.Stat(filepath.Join(dir, "control.tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("control.tmp left behind: %v", err)
	}
}

func TestReadControlOfAMissingFileIsNotExist(t *testing.T) {
	_, err := ReadControl(vfs.OS(), t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestReadControlRejectsDamage(t *testing.T) {
	le := binary.LittleEndian
	reseal := func(b []byte) []byte {
		le.PutUint32(b[offCtlCRC:], page.CRC32C(b[:offCtlCRC]))
		return b
	}
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		want   error
	}{
		{"flipped bit", func(b []byte) []byte { b[20] ^= 4; return b }, ErrCorruptControl},
		{"short file", func(b []byte) []byte { return b[:30] }, ErrCorruptControl},
		{"long file", func(b []byte) []byte { return append(b, 0) }, ErrCorruptControl},
		{"empty file", func(b []byte) []byte { return nil }, ErrCorruptControl},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return reseal(b) }, ErrCorruptControl},
		{"unknown state", func(b []byte) []byte { b[offCtlState] = 9; return reseal(b) }, ErrCorruptControl},
		{"unknown layout version", func(b []byte) []byte {
			le.PutUint32(b[offCtlLayout:], ControlLayoutVersion+1)
			return reseal(b)
		}, ErrUnsupportedVersion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := tc.mutate(EncodeControl(sampleControl()))
			if err := os.WriteFile(filepath.Join(dir, ControlFileName), b, 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := ReadControl(vfs.OS(), dir)
			if !errors.Is(err, tc.want) {
				t.Fatalf("read %+v, %v; want an error wrapping %v", c, err, tc.want)
			}
		})
	}
}

// FuzzDecodeControl checks that DecodeControl never panics and that what it
// accepts re-encodes to the same bytes.
func FuzzDecodeControl(f *testing.F) {
	f.Add(EncodeControl(sampleControl()))
	f.Add(EncodeControl(&Control{State: StateShutdown}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeControl(b)
		if err != nil {
			return
		}
		if again := EncodeControl(c); string(again) != string(b) {
			t.Fatalf("accepted bytes do not re-encode identically")
		}
	})
}
