package replication

import (
	"encoding/binary"
	"path"
	"strings"
	"testing"
)

// FuzzBackupName feeds arbitrary bytes to the base-backup stream's name decoder (bytes from
// the network): it decodes or fails without panicking, and a name it accepts stays inside
// the target directory (relative, clean, no "..", no NUL) and leaves the rest of the input
// after it.
func FuzzBackupName(f *testing.F) {
	for _, name := range []string{"base/1", "global/pg_control", "../etc/passwd", "/abs", "a/../../b", "a\x00b", ".", ""} {
		f.Add(append(binary.BigEndian.AppendUint16(nil, uint16(len(name))), name+"rest"...))
	}
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, rest, err := backupName(b)
		if err != nil {
			return
		}
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(name, 0) {
			t.Fatalf("accepted name %q", name)
		}
		if len(rest) != len(b)-2-len(name) {
			t.Fatalf("name %q of %d bytes leaves %d of %d bytes", name, len(name), len(rest), len(b))
		}
	})
}
