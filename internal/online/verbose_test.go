package online

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// pg15Lazy is PostgreSQL 15's VACUUM (VERBOSE) of a table with a TOAST table, as the notices
// arrive (recorded from the package's tests against a real server).
var pg15Lazy = []string{
	`INFO:  vacuuming "t1.public.items"`,
	`INFO:  finished vacuuming "t1.public.items": index scans: 1
pages: 0 removed, 1177 remain, 1177 scanned (100.00% of total)
tuples: 20000 removed, 20000 remain, 0 are dead but not yet removable
index scan needed: 1177 pages from table (100.00% of total) had 20000 dead item identifiers removed
index "items_pkey": pages: 112 in total, 0 newly deleted, 0 currently deleted, 0 reusable
avg read rate: 0.018 MB/s, avg write rate: 0.026 MB/s
buffer usage: 3695 hits, 2 misses, 3 dirtied
WAL usage: 3643 records, 0 full page images, 315422 bytes`,
	`INFO:  finished vacuuming "t1.pg_toast.pg_toast_16387": index scans: 0
pages: 0 removed, 0 remain, 0 scanned (100.00% of total)
tuples: 0 removed, 0 remain, 0 are dead but not yet removable
buffer usage: 27 hits, 1 misses, 0 dirtied
WAL usage: 1 records, 0 full page images, 188 bytes`,
}

func TestParseVerboseReadsTheTablesSummaryNotItsToastTables(t *testing.T) {
	v := ParseVerbose(pg15Lazy)
	want := Verbose{Found: true, IndexScans: 1, PagesRemoved: 0, PagesRemaining: 1177, PagesScanned: 1177,
		TuplesRemoved: 20000, TuplesRemaining: 20000, Hits: 3695, Misses: 2, Dirtied: 3,
		WALRecords: 3643, WALBytes: 315422}
	ix := v.Indexes
	v.Indexes = nil
	if !reflect.DeepEqual(v, want) {
		t.Errorf("parsed %+v\nwant   %+v", v, want)
	}
	if len(ix) != 1 || ix[0] != (VerboseIndex{Name: "items_pkey", Pages: 112, EntriesRemoved: 20000}) {
		t.Errorf("indexes %+v", ix)
	}
}

func TestParseVerboseReadsTheEngineServersTimeSleptAndNoneFromPostgreSQL(t *testing.T) {
	rep := vacuum.Report{Table: "orders", Mode: vacuum.ModeLazy, Elapsed: 2500 * time.Millisecond, Slept: 1750 * time.Millisecond}
	var b strings.Builder
	if err := rep.Format(&b); err != nil {
		t.Fatal(err)
	}
	v := ParseVerbose([]string{"INFO:  " + b.String()})
	if !v.Found || !v.SleptReported || v.Slept != 1750*time.Millisecond {
		t.Errorf("from the engine's VERBOSE %q parsed slept %v (reported %v), want 1.75s", b.String(), v.Slept, v.SleptReported)
	}
	pg := append([]string{}, pg15Lazy...)
	pg[1] += "\nsystem usage: CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.05 s"
	if v := ParseVerbose(pg); v.SleptReported || v.Slept != 0 {
		t.Errorf("PostgreSQL 15's VERBOSE gave slept %v (reported %v): it has no such figure", v.Slept, v.SleptReported)
	}
}

func TestParseVerboseReadsFullsSummary(t *testing.T) {
	v := ParseVerbose([]string{`INFO:  vacuuming "public.orders"`,
		"INFO:  \"public.orders\": found 6000 removable, 6000 nonremovable row versions in 541 pages\nDETAIL:  0 dead row versions cannot be removed yet."})
	if !v.Found || v.TuplesRemoved != 6000 || v.TuplesRemaining != 6000 || v.PagesScanned != 541 {
		t.Errorf("parsed %+v", v)
	}
}

func FuzzParseVerbose(f *testing.F) {
	f.Add(strings.Join(pg15Lazy, "\x00"))
	f.Add(`INFO:  "t": found 99999999999999999999 removable, 1 nonremovable row versions in 2 pages`)
	f.Add(`scanned index "a""b" to remove 3 row versions`)
	f.Fuzz(func(t *testing.T, s string) {
		v := ParseVerbose(strings.Split(s, "\x00"))
		for _, n := range []int64{v.IndexScans, v.PagesRemoved, v.PagesRemaining, v.PagesScanned, v.TuplesRemoved,
			v.TuplesRemaining, v.Hits, v.Misses, v.Dirtied, v.WALRecords, v.WALFullPageImages, v.WALBytes} {
			if n < 0 {
				t.Fatalf("negative figure from %q: %+v", s, v)
			}
		}
		for _, ix := range v.Indexes {
			if ix.Pages < 0 {
				t.Fatalf("negative index pages from %q", s)
			}
		}
	})
}
