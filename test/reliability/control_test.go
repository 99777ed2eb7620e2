package reliability

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// setControlVersion rewrites the control file with another format version
// (and a valid CRC), as a newer or older build would have left it.
func setControlVersion(t *testing.T, dir string, v uint32) {
	t.Helper()
	c, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Version = v
	if err := wal.WriteControl(vfs.OS(), dir, c); err != nil {
		t.Fatal(err)
	}
}
