package runner

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// BenchmarkBloat loads 100,000 rows (one index, 100-byte payloads) per iteration and deletes
// 20% of them, as `vacuum-runner bloat` does, reporting rows loaded per second. The 1M-row
// figure is measured with the binary:
//
//	vacuum-runner init --data /tmp/big && time vacuum-runner bloat --data /tmp/big --table big --rows 1000000
func BenchmarkBloat(b *testing.B) {
	const rows = 100000
	for b.Loop() {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "data")
		if err := engine.Init(dir, engine.Options{}); err != nil {
			b.Fatal(err)
		}
		db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 256 << 20, CheckpointWALBytes: bloatCheckpointWAL})
		if err != nil {
			b.Fatal(err)
		}
		p := bloatParams{table: "t", rows: rows, deadFraction: 0.2, indexes: 1, payloadBytes: 100, seed: 1, batch: 10000}
		b.StartTimer()
		out, err := bloat(context.Background(), db, p)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(out.RowsPerSecond, "rows/s")
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
