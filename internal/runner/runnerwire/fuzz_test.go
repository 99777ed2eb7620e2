package runnerwire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func addGoldenSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzResolveRunSpec feeds arbitrary --spec JSON to the decoder and Resolve: neither may
// panic, and an accepted spec has positive memory needs and in-range values.
func FuzzResolveRunSpec(f *testing.F) {
	addGoldenSeeds(f, "runspec.json", "throttle.json")
	f.Add([]byte(`{"dataDir":"/d","ringSize":"1e30","parallelism":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s RunSpec
		if json.Unmarshal(data, &s) != nil {
			return
		}
		r, err := s.Resolve()
		if err != nil {
			return
		}
		if r.Parallelism < MinParallelism || r.Parallelism > MaxParallelism || r.Throttle.CostDelay > MaxCostDelay {
			t.Fatalf("accepted out-of-range spec: %+v", r)
		}
		if MemoryRequirement(r) <= 0 {
			t.Fatalf("memory requirement %d for %+v", MemoryRequirement(r), r)
		}
	})
}

// FuzzTruncateSummary decodes a termination message the way the operator does and
// re-truncates it: no panic, and the result always fits.
func FuzzTruncateSummary(f *testing.F) {
	addGoldenSeeds(f, "summary-succeeded.json", "summary-corruption.json", "summary-cancelled.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Summary
		if json.Unmarshal(data, &s) != nil {
			return
		}
		_, b, err := TruncateSummary(s, MaxSummaryBytes)
		if err == nil && len(b) > MaxSummaryBytes {
			t.Fatalf("%d bytes over the limit", len(b))
		}
	})
}
