package storage

import (
	"os"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func loadBlock(b *testing.B, path string, blk int) page.Page {
	f, err := os.Open(path)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	p := make([]byte, page.Size)
	if _, err := f.ReadAt(p, int64(blk*page.Size)); err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkTmpValidate(b *testing.B) {
	for _, c := range []struct{ name, path string }{{"heap", "/tmp/vperf/base/base/16385"}, {"btree", "/tmp/vperf/base/base/16387"}} {
		p := loadBlock(b, c.path, 100)
		b.Run(c.name, func(b *testing.B) {
			b.Logf("items %d", p.NumItems())
			for b.Loop() {
				if err := p.Validate(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"-checksum", func(b *testing.B) {
			for b.Loop() {
				if err := page.VerifyChecksum(p, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
		q := make(page.Page, page.Size)
		b.Run(c.name+"-compact", func(b *testing.B) {
			for b.Loop() {
				copy(q, p)
				q.Compact()
			}
		})
	}
}
