package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func TestSummaryOfManyTablesFitsTheTerminationLogWithTotalsFirst(t *testing.T) {
	rr := &vacuum.BatchReport{}
	for i := range 200 {
		rr.Tables = append(rr.Tables, &vacuum.Report{Table: fmt.Sprintf("table_%03d", i), Mode: vacuum.ModeLazy,
			TuplesRemoved: 10, Elapsed: time.Second, Indexes: []vacuum.IndexReport{{Name: "pkey"}}})
		rr.Totals.TuplesRemoved += 10
	}
	rr.Totals.TablesVacuumed = 200
	path := filepath.Join(t.TempDir(), "termination-log")
	if err := writeSummary(path, summaryOf(context.Background(), rr, nil, 0)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > runnerwire.MaxSummaryBytes {
		t.Fatalf("summary of %d bytes, over %d", len(b), runnerwire.MaxSummaryBytes)
	}
	var s runnerwire.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Totals.TuplesRemoved != 2000 || s.Totals.TablesVacuumed != 200 || len(s.Tables) == 0 ||
		len(s.Tables)+s.TablesOmitted != 200 || s.Phase != runnerwire.SummarySucceeded {
		t.Errorf("summary keeps %d tables, omits %d, totals %+v: want all 200 counted and the totals whole",
			len(s.Tables), s.TablesOmitted, s.Totals)
	}
}

func TestExitCodesFollowTheContract(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		bySignal bool
		want     int
	}{
		{"success", nil, false, runnerwire.ExitOK},
		{"bad flag", usagef("--x: bad"), false, runnerwire.ExitBadInput},
		{"not a data dir", fmt.Errorf("open: %w", engine.ErrNotDataDir), false, runnerwire.ExitBadInput},
		{"unsupported version", fmt.Errorf("open: %w", engine.ErrUnsupportedVersion), false, runnerwire.ExitBadInput},
		{"unknown table", fmt.Errorf("vacuum: %w", engine.ErrNoSuchTable), false, runnerwire.ExitBadInput},
		{"memory", &MemoryError{Need: 2, Limit: 1, File: "memory.max"}, false, runnerwire.ExitBadInput},
		{"busy", fmt.Errorf("open: %w", engine.ErrInUse), false, runnerwire.ExitBusy},
		{"table busy", fmt.Errorf("vacuum: %w", vacuum.ErrVacuumInProgress), false, runnerwire.ExitBusy},
		{"corrupt page", fmt.Errorf("vacuum: %w", &storage.CorruptPageError{File: "base/1", Block: 3}), false, runnerwire.ExitCorruption},
		{"check problems", &CorruptionError{Problems: []engine.Problem{{File: "f", Block: 1}}}, false, runnerwire.ExitCorruption},
		{"no space before", fmt.Errorf("full: %w", &vacuum.NoSpaceError{}), false, runnerwire.ExitNoSpace},
		{"ENOSPC during", fmt.Errorf("write: %w", &os.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}), false, runnerwire.ExitNoSpace},
		{"cancelled by a signal", fmt.Errorf("vacuum: %w", context.Canceled), true, runnerwire.ExitCancelled},
		{"refused crash recovery", fmt.Errorf("open: %w", engine.ErrRecoveryRefused), false, runnerwire.ExitNeedsRecovery},
		{"needs recovery in the middle of the run (retried)", fmt.Errorf("vacuum: %w",
			fmt.Errorf("%w: fsync base/16385: %w", engine.ErrNeedsRecovery, syscall.EIO)), false, runnerwire.ExitInternal},
		{"needs recovery after a full disk", fmt.Errorf("vacuum: %w",
			fmt.Errorf("%w: fsync base/16385: %w", engine.ErrNeedsRecovery, syscall.ENOSPC)), false, runnerwire.ExitNoSpace},
		{"anything else", errors.New("boom"), false, runnerwire.ExitInternal},
	}
	for _, c := range cases {
		if got := exitCode(c.err, c.bySignal); got != c.want {
			t.Errorf("%s: exit code %d, want %d", c.name, got, c.want)
		}
	}
}
