package txn

import "github.com/vacuumops/vacuum-operator/internal/engine/vfs"

// testFS is the real operating-system file system.
func testFS() vfs.FS { return vfs.OS() }
