package main

import (
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// TestStopAfterThenResumeRemovesEveryDeadTupleAcrossInvocations: `vacuum --stop-after`
// exits 0 with the table complete false at the block it reached, each `--resume` continues
// from there and counts only its own work, and together they remove every dead tuple, as one
// vacuum does.
func TestStopAfterThenResumeRemovesEveryDeadTupleAcrossInvocations(t *testing.T) {
	dir := copyFixture(t)
	before := stats(t, dir)
	args := []string{"vacuum", "--data", dir, "--json", "--stop-after", "300ms", "--cost-limit", "150",
		"--maintenance-work-mem", "1Mi"}
	var removed, reached int64
	stops, unreached := 0, 0
	for inv := 0; ; inv++ {
		if inv > 40 {
			t.Fatalf("not complete after %d invocations", inv)
		}
		a := args
		if inv > 0 {
			a = append(append([]string(nil), args...), "--resume")
		}
		var rep runnerwire.Report
		r := mustVR(t, a...)
		decode(t, r.stdout, &rep)
		if len(rep.Tables) != 1 {
			t.Fatalf("invocation %d reports %d tables", inv, len(rep.Tables))
		}
		tr := rep.Tables[0]
		removed += tr.TuplesRemoved
		if !tr.Complete && tr.PagesScanned == 0 && tr.ElapsedSeconds == 0 && rep.StopReason == runnerwire.StopReasonWindowClosed {
			// The window closed before the vacuum reached the table (opening the directory
			// took the whole 300 ms on a loaded machine): nothing done, nothing lost, and
			// the table is reported where its saved position stands.
			if tr.BlockReached != reached {
				t.Fatalf("invocation %d did not reach the table and reports block %d, want its saved %d", inv, tr.BlockReached, reached)
			}
			unreached++
			continue
		}
		if inv > 0 && tr.ResumedFromBlock != reached {
			t.Fatalf("invocation %d resumed from block %d, want %d (the previous one's blockReached)\nstdout: %s\nstderr: %s",
				inv, tr.ResumedFromBlock, reached, r.stdout, r.stderr)
		}
		if tr.Complete {
			if rep.StopReason != "" || tr.BlockReached != tr.PagesTotal {
				t.Errorf("complete invocation: stopReason %q, block %d of %d", rep.StopReason, tr.BlockReached, tr.PagesTotal)
			}
			break
		}
		stops++
		if rep.StopReason != runnerwire.StopReasonWindowClosed || tr.BlockReached < reached {
			t.Fatalf("stopped invocation %d: stopReason %q, block %d after %d", inv, rep.StopReason, tr.BlockReached, reached)
		}
		reached = tr.BlockReached
	}
	t.Logf("%d stopped invocations (%d more stopped before the table), then one complete; %d tuples removed", stops, unreached, removed)
	if stops < 1 {
		t.Errorf("only %d invocations were stopped: the test resumed too little", stops)
	}
	if removed != before.DeadTuples {
		t.Errorf("%d invocations removed %d tuples in all, want the %d dead ones", stops+1, removed, before.DeadTuples)
	}
	if after := stats(t, dir); after.DeadTuples != 0 || after.LiveTuples != before.LiveTuples {
		t.Errorf("after the last invocation: %d dead, %d live; want 0 and %d", after.DeadTuples, after.LiveTuples, before.LiveTuples)
	}
	checkOK(t, dir)
}

// TestFullThatDoesNotFitTheWindowIsNotStarted: a FULL estimated (pages over the throttle's
// pages per second) longer than --stop-after leaves the table untouched and says
// WindowTooShort, exit 0.
func TestFullThatDoesNotFitTheWindowIsNotStarted(t *testing.T) {
	dir := copyFixture(t)
	before := stats(t, dir)
	r := mustVR(t, "full", "--data", dir, "--json", "--stop-after", "2s", "--cost-limit", "1", "--cost-delay", "100ms")
	var rep runnerwire.Report
	decode(t, r.stdout, &rep)
	if rep.StopReason != runnerwire.StopReasonWindowTooShort || len(rep.Tables) != 1 || rep.Tables[0].Complete {
		t.Fatalf("stopReason %q, tables %+v: want WindowTooShort and the table not complete", rep.StopReason, rep.Tables)
	}
	if !strings.Contains(r.stderr, "WindowTooShort") {
		t.Errorf("stderr %q does not say why the FULL was not started", r.stderr)
	}
	if after := stats(t, dir); after.Pages != before.Pages || after.DeadTuples != before.DeadTuples {
		t.Errorf("the refused FULL changed the table: %d pages, %d dead (was %d, %d)", after.Pages, after.DeadTuples, before.Pages, before.DeadTuples)
	}
}
