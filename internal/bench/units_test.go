package bench

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/tidstore"
)

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name     string
		sorted   []time.Duration
		q        float64
		expected time.Duration
	}{
		{"one value", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four is the second", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 10 is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.q); got != tc.expected {
				t.Errorf("percentile(%v) = %v, want %v", tc.q, got, tc.expected)
			}
		})
	}
}

func TestLatencyOfEmptyWindowIsZero(t *testing.T) {
	l := latencyOf(nil, time.Second)
	if l.Count != 0 || l.P99 != 0 || l.PerSecond() != 0 {
		t.Errorf("empty window: %+v", l)
	}
}

func TestTableRejectsNonFiniteNumbersAndWrongWidth(t *testing.T) {
	tb := NewTable("x", 1, "name", "a", "b")
	for _, tc := range []struct {
		name   string
		labels []string
		nums   []float64
	}{
		{"NaN", []string{"r"}, []float64{1, math.NaN()}},
		{"infinity", []string{"r"}, []float64{math.Inf(1), 1}},
		{"too few numbers", []string{"r"}, []float64{1}},
		{"missing label", nil, []float64{1, 2}},
	} {
		if err := tb.Add(tc.labels, tc.nums...); err == nil {
			t.Errorf("%s: Add accepted the row", tc.name)
		}
	}
	if len(tb.Rows) != 0 {
		t.Errorf("rejected rows were kept: %v", tb.Rows)
	}
}

func TestTableRoundTripsThroughCSV(t *testing.T) {
	tb := NewTable("round", 1, "run", "seconds", "count")
	if err := tb.Add([]string{"delay 2ms, limit 200"}, 1.25, 3); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := tb.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, "round.csv") {
		t.Errorf("written to %s", p)
	}
	h, rows, err := ReadCSV(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || len(rows) != 1 || rows[0][0] != "delay 2ms, limit 200" || rows[0][1] != "1.25" || rows[0][2] != "3" {
		t.Errorf("read back %v %v", h, rows)
	}
}

func TestSortedTIDsFindsExactlyWhatWasAppended(t *testing.T) {
	s := NewSortedTIDs(4)
	in := []page.TID{{Block: 0, Off: 3}, {Block: 0, Off: 9}, {Block: 7, Off: 1}, {Block: 1 << 30, Off: 291}}
	for _, tid := range in {
		if err := s.Append(tid); err != nil {
			t.Fatal(err)
		}
	}
	if s.MemoryBytes() != int64(len(in)*6) {
		t.Errorf("MemoryBytes %d, want %d (6 bytes a TID)", s.MemoryBytes(), len(in)*6)
	}
	for _, tid := range in {
		if !s.Contains(tid) {
			t.Errorf("%v not found", tid)
		}
	}
	for _, tid := range []page.TID{{Block: 0, Off: 4}, {Block: 7, Off: 2}, {Block: 2}, {Block: 1<<30 + 1, Off: 1}, {Block: 0, Off: 1}} {
		if s.Contains(tid) {
			t.Errorf("%v found but never appended", tid)
		}
	}
	if err := s.Append(page.TID{Block: 0, Off: 1}); err == nil {
		t.Error("an out-of-order TID was accepted")
	}
}

func TestSyntheticSetsAgreeBetweenStoreAndArray(t *testing.T) {
	for _, d := range []float64{1, 20, 100} {
		res, err := MeasureSynthetic(5_000, d, 60, 5_000, 1)
		if err != nil {
			t.Fatalf("density %.0f: %v", d, err)
		}
		if res.ArrayBytes != 6*5_000 {
			t.Errorf("density %.0f: array %d bytes, want 30000", d, res.ArrayBytes)
		}
		if res.HitFraction <= 0 || res.HitFraction > 1 {
			t.Errorf("density %.0f: hit fraction %v", d, res.HitFraction)
		}
		if want := d / 100; math.Abs(res.HitFraction-want) > 0.05 {
			t.Errorf("density %.0f: hit fraction %.3f, want about %.2f (probes are uniform over the set's TID space)", d, res.HitFraction, want)
		}
	}
	// The store is smaller than the array at every realistic density of a
	// large set (the claim experiment 4 publishes).
	res, err := MeasureSynthetic(100_000, 20, 60, 1_000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.StoreBytes >= res.ArrayBytes {
		t.Errorf("100k TIDs at 20 %%: store %d bytes, array %d", res.StoreBytes, res.ArrayBytes)
	}
	if st := tidstore.New(); st.MemoryBytes() != 0 {
		t.Errorf("empty store reports %d bytes", st.MemoryBytes())
	}
}

func TestMachineFactsAreReadFromTheHost(t *testing.T) {
	m := ReadMachine(t.TempDir())
	if m.Cores < 1 || m.GoVersion == "" {
		t.Errorf("cores %d, go %q", m.Cores, m.GoVersion)
	}
	if m.Kernel == "" || m.MemoryMiB <= 0 || m.FS == "?" || m.FS == "" {
		t.Errorf("kernel %q, memory %d MiB, file system %q: /proc not read", m.Kernel, m.MemoryMiB, m.FS)
	}
	if m.LoadStart == "?" {
		t.Errorf("load average unreadable")
	}
}
