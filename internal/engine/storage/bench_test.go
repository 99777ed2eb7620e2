package storage

import (
	"fmt"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// BenchmarkSequentialRead reads a 32 MiB fork block by block, buffered (the
// blocks are in the OS page cache: a "miss" is a memory copy) and with
// O_DIRECT (every read goes to the device), and reports MB/s.
func BenchmarkSequentialRead(b *testing.B) {
	const nblocks = 4096
	dir := b.TempDir()
	setup, err := Open(vfs.NewOS(b.Logf), dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range nblocks {
		if err := setup.Write(1, MainFork, BlockNumber(i), testPage(fmt.Sprint(i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := setup.SyncAll(); err != nil {
		b.Fatal(err)
	}
	if err := setup.Close(); err != nil {
		b.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		name := map[bool]string{false: "buffered", true: "direct"}[direct]
		b.Run(name, func(b *testing.B) {
			m, err := Open(vfs.NewOS(b.Logf), dir, Options{Direct: direct, Logf: b.Logf})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = m.Close() }()
			buf := vfs.AlignedBuffer(page.Size)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := m.Read(1, MainFork, BlockNumber(i%nblocks), buf, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*page.Size/b.Elapsed().Seconds()/1e6, "MB/s")
			if direct && !m.Direct() {
				b.Log("O_DIRECT refused: the direct figure is buffered")
			}
		})
	}
}
