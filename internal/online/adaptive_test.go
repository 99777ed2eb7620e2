package online_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// TestAdaptiveIsRefusedWhereItCannotRun: an adaptive throttle with no static ceiling has
// nothing to scale (on PostgreSQL, which adapts the cost limit between tables, the cost
// throttle must be on).
func TestAdaptiveIsRefusedWhereItCannotRun(t *testing.T) {
	on := runnerwire.DefaultAdaptive()
	on.LatencyTarget = 5 * time.Millisecond
	for _, tc := range []struct {
		name   string
		server online.Server
		l      runnerwire.Limits
		want   string
	}{
		{"PostgreSQL without the cost throttle", online.Server{Kind: online.KindPostgreSQL, Major: 15}, limits(0, 200), "adapts the cost limit between tables"},
		{"no ceiling", online.Server{Kind: online.KindEngineServer}, limits(0, 200), "needs a static ceiling to scale"},
	} {
		err := online.Check(tc.server, online.Options{Parallelism: 1, Throttle: tc.l, Adaptive: on})
		var fe *online.FieldError
		if !errors.As(err, &fe) || fe.Field != "throttle.adaptive" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a throttle.adaptive FieldError saying %q", tc.name, err, tc.want)
		}
	}
	for _, kind := range []online.Kind{online.KindEngineServer, online.KindPostgreSQL} {
		if err := online.Check(online.Server{Kind: kind, Major: 15}, online.Options{Parallelism: 1,
			Throttle: limits(2*time.Millisecond, 200), Adaptive: on}); err != nil {
			t.Errorf("%v with a ceiling: %v", kind, err)
		}
	}
}

// TestEngineServerRunSendsAdaptiveTargetsAndReportsTheBinding runs two slow tables on the
// engine server: the first with a latency target from the start (the vacuum_adaptive_*
// settings before the table: its progress carries the server's adaptive binding and
// budget), the second without one (no adaptive progress) until UpdateAdaptive sets one
// live through vacuum_set_throttle (then it does).
//
// Its own work takes a few seconds; the first test of the package to start an engine
// server also pays engineServerBinary's go build of cmd/engine-server (most of the time
// this test was charged with when it ran first).
func TestEngineServerRunSendsAdaptiveTargetsAndReportsTheBinding(t *testing.T) {
	addr := startEngineServer(t)
	c := engineConn(t, addr)
	for _, tb := range []string{"a", "b"} {
		exec(t, c, "CREATE TABLE "+tb+" (id bigint PRIMARY KEY, n bigint, pad bytea)")
		// 300 rows: about 20 pages after the UPDATE, tens of seconds at the slow throttle;
		// only the fast ceiling below lets the VACUUM finish.
		exec(t, c, "INSERT INTO "+tb+" SELECT g, g, '\\x"+fmt.Sprintf("%0200d", 0)+"'::bytea FROM generate_series(1, 300) g")
		exec(t, c, "UPDATE "+tb+" SET n = n + 1")
	}
	on := runnerwire.DefaultAdaptive()
	on.LatencyTarget = 50 * time.Millisecond
	slow := limits(100*time.Millisecond, 1)
	for _, tc := range []struct {
		table string
		start runnerwire.AdaptiveTargets
	}{{"a", on}, {"b", runnerwire.DefaultAdaptive()}} {
		var rec recorder
		run, err := online.New(context.Background(), engineTarget(t, addr), online.Options{Parallelism: 1, Tables: []string{tc.table},
			Throttle: slow, Adaptive: tc.start, OnProgress: rec.add, PollInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := run.Vacuum(context.Background()); done <- err }()
		// scanned is the progress reports since the VACUUM began scanning.
		scanned := func() []runnerwire.Progress {
			all := rec.all()
			for i, p := range all {
				if p.PagesScanned > 0 {
					return all[i:]
				}
			}
			return nil
		}
		adaptive := func() *runnerwire.AdaptiveProgress {
			all := rec.all()
			if len(all) == 0 {
				return nil
			}
			return all[len(all)-1].Adaptive
		}
		waitUntil(t, 30*time.Second, "table "+tc.table+" scanning", func() bool { return len(scanned()) > 0 })
		if tc.start.Off() {
			// Three reports while it scans, 50 ms apart, span more than one of the server's
			// 100 ms control periods (after which a target would show): none carries
			// adaptive progress.
			waitUntil(t, 10*time.Second, "table "+tc.table+"'s third progress report while scanning", func() bool { return len(scanned()) >= 3 })
			for _, p := range scanned() {
				if p.Adaptive != nil {
					t.Fatalf("table %s with no target: adaptive progress %+v, want none", tc.table, p.Adaptive)
				}
			}
			if err := run.UpdateAdaptive(on); err != nil {
				t.Fatalf("UpdateAdaptive: %v", err)
			}
		}
		waitUntil(t, 5*time.Second, "table "+tc.table+"'s adaptive binding in progress", func() bool { return adaptive() != nil })
		a := adaptive()
		if a.Binding == "" || a.BudgetPerMille < 1 || a.BudgetPerMille > 1000 {
			t.Errorf("table %s: adaptive progress %+v, want a binding and a budget in 1..1000", tc.table, a)
		}
		t.Logf("table %s: %+v", tc.table, a)
		// A fast ceiling (still a ceiling: the adaptive throttle keeps something to scale).
		if err := run.UpdateThrottle(limits(10*time.Microsecond, 10000)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("table %s: %v", tc.table, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("table %s did not finish", tc.table)
		}
		_ = run.Close()
	}
}
