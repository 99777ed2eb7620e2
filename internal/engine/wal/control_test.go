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
		RedoLSN: 0x1234_0000_00, NextXID: 1 << 31, NextOID: 16384, SystemID: 0x0123_4567_89AB_CDEF,
		Opener: "run 3f1c2a4e-0b1d-4c5e-9f00-1a2b3c4d5e6f attempt 2"}
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
		{"next xid 2^44", func(b []byte) []byte { le.PutUint64(b[offCtlNextXID:], 1<<44); return reseal(b) }, ErrCorruptControl},
		{"next xid 2^63", func(b []byte) []byte { le.PutUint64(b[offCtlNextXID:], 1<<63); return reseal(b) }, ErrCorruptControl},
		{"redo after the checkpoint", func(b []byte) []byte { le.PutUint64(b[offCtlRedo:], 1<<63); return reseal(b) }, ErrCorruptControl},
		{"opener longer than allowed", func(b []byte) []byte { b[offCtlOpenerLen] = 200; return reseal(b) }, ErrCorruptControl},
		{"garbage after the opener", func(b []byte) []byte { b[offCtlCRC-1] = 1; return reseal(b) }, ErrCorruptControl},
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

// encodeControlV1 is the layout 1 encoding (48 bytes, no system
// identifier or opener) the first builds wrote.
func encodeControlV1(c *Control) []byte {
	b := EncodeControl(c)[:controlSizeV1]
	binary.LittleEndian.PutUint32(b[offCtlLayout:], 1)
	binary.LittleEndian.PutUint32(b[offCtlCRCv1:], page.CRC32C(b[:offCtlCRCv1]))
	return b
}

func TestReadControlReadsALayout1FileWithoutIdentifierOrOpener(t *testing.T) {
	want := sampleControl()
	want.SystemID, want.Opener = 0, ""
	got, err := DecodeControl(encodeControlV1(want))
	if err != nil {
		t.Fatalf("decode a layout 1 control file: %v", err)
	}
	if *got != *want {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// FuzzDecodeControl checks that DecodeControl never panics, never accepts
// values no directory holds, and that what it accepts re-encodes (as
// layout 2) to a control file that decodes the same; layout 2 input
// re-encodes to the same bytes.
func FuzzDecodeControl(f *testing.F) {
	f.Add(EncodeControl(sampleControl()))
	f.Add(EncodeControl(&Control{State: StateShutdown, RedoLSN: FirstLSN, CheckpointLSN: FirstLSN}))
	f.Add(encodeControlV1(sampleControl()))
	for _, xid := range []uint64{1 << 32, 1<<32 + 1, 1 << 44, 1 << 63, ^uint64(0)} {
		c := sampleControl()
		c.NextXID = xid
		f.Add(EncodeControl(c))
		f.Add(encodeControlV1(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeControl(b)
		if err != nil {
			return
		}
		if c.NextXID > MaxNextXID || c.RedoLSN > c.CheckpointLSN || len(c.Opener) > MaxOpenerLen {
			t.Fatalf("accepted impossible values %+v", c)
		}
		again := EncodeControl(c)
		if len(b) == ControlSize && string(again) != string(b) {
			t.Fatalf("accepted layout 2 bytes do not re-encode identically")
		}
		c2, err := DecodeControl(again)
		if err != nil || *c2 != *c {
			t.Fatalf("re-encoded control decodes to %+v, %v; want %+v", c2, err, c)
		}
	})
}
