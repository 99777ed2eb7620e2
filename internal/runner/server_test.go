package runner

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func newTestState(t *testing.T) *runState {
	return &runState{start: time.Now(), tables: 2, logf: t.Logf}
}

func do(t *testing.T, h http.Handler, method, path, auth, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestThrottleEndpointChecksTheBearerTokenAndTheBody(t *testing.T) {
	s := newTestState(t)
	h := newHandler(s, []byte("tok"))
	cases := []struct {
		name, method, auth, body string
		want                     int
	}{
		{"no header", "PUT", "", `{}`, 401},
		{"wrong token", "PUT", "Bearer tak", `{}`, 401},
		{"longer token", "PUT", "Bearer tokk", `{}`, 401},
		{"empty bearer", "PUT", "Bearer ", `{}`, 401},
		{"GET", "GET", "Bearer tok", ``, 405},
		{"not JSON", "PUT", "Bearer tok", `costDelay=1ms`, 400},
		{"unknown field", "PUT", "Bearer tok", `{"delay":"1ms"}`, 400},
		{"two values", "PUT", "Bearer tok", `{} {}`, 400},
		{"out of range", "PUT", "Bearer tok", `{"costDelay":"1s"}`, 400},
		{"too large", "PUT", "Bearer tok", `{"costDelay":"` + strings.Repeat(" ", maxThrottleBody) + `"}`, 413},
		{"before the run: kept for it", "PUT", "bearer tok", `{"costLimit":50}`, 202},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if rec := do(t, h, c.method, "/throttle", c.auth, c.body); rec.Code != c.want {
				t.Errorf("%s /throttle = %d %s, want %d", c.method, rec.Code, rec.Body, c.want)
			}
		})
	}
	p := s.takePending()
	if p == nil || p.CostLimit != 50 || p.CostDelay != runnerwire.DefaultCostDelay {
		t.Errorf("pending throttle %+v: want cost limit 50 and the default delay", p)
	}
}

func TestThrottleEndpointUpdatesTheRunningVacuumAndRefusesAfterTheEnd(t *testing.T) {
	s := newTestState(t)
	run, err := vacuum.NewBatch(vacuum.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s.setRun(run)
	h := newHandler(s, []byte("tok"))
	rec := do(t, h, "PUT", "/throttle", "Bearer tok", `{"costDelay":"5ms","costLimit":1000,"maxWriteBytesPerSecond":"8Mi"}`)
	if rec.Code != 200 {
		t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
	}
	got := run.Settings()
	if got.CostDelay != 5*time.Millisecond || got.CostLimit != 1000 || got.MaxWriteBytesPerSecond != 8<<20 || got.PageDirtyCost != 20 {
		t.Errorf("run settings %+v after PUT: want 5ms/1000, 8Mi writes, default page costs", got)
	}
	var echoed runnerwire.Throttle
	if err := json.Unmarshal(rec.Body.Bytes(), &echoed); err != nil || echoed.MaxWriteBytesPerSecond.String() != "8Mi" {
		t.Errorf("PUT answered %s (%v), want the applied throttle", rec.Body, err)
	}
	s.finish()
	if rec := do(t, h, "PUT", "/throttle", "Bearer tok", `{}`); rec.Code != 409 {
		t.Errorf("PUT after the run = %d, want 409", rec.Code)
	}
}

func TestThrottleEndpointIsDisabledWithoutAToken(t *testing.T) {
	h := newHandler(newTestState(t), nil)
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		if rec := do(t, h, "PUT", "/throttle", auth, `{}`); rec.Code != 403 {
			t.Errorf("PUT with %q = %d, want 403", auth, rec.Code)
		}
	}
}

func TestProgressBeforeTheRunStartsSaysInitializing(t *testing.T) {
	h := newHandler(newTestState(t), nil)
	rec := do(t, h, "GET", "/progress", "", "")
	var p runnerwire.Progress
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 200 {
		t.Fatalf("GET /progress = %d %s (%v)", rec.Code, rec.Body, err)
	}
	if p.Phase != runnerwire.PhaseInitializing || p.TablesTotal != 2 || p.Tables == nil {
		t.Errorf("progress %+v: want initializing, 2 tables, an empty (not null) table list", p)
	}
	if m := do(t, h, "GET", "/metrics", "", ""); m.Code != 200 || !strings.Contains(m.Body.String(), `vacuum_runner_phase{phase="initializing",table=""} 1`) {
		t.Errorf("/metrics = %d, lacks the phase:\n%s", m.Code, m.Body)
	}
}

// TestPauseEndpointPausesTheRunAndProgressSaysSo: PUT /pause needs the control token and a
// {"paused": bool} body; a pause sent before the run starts applies when it does; progress
// shows paused and the time spent paused.
func TestPauseEndpointPausesTheRunAndProgressSaysSo(t *testing.T) {
	s := newTestState(t)
	h := newHandler(s, []byte("tok"))
	for _, c := range []struct {
		name, auth, body string
		want             int
	}{
		{"no token", "", `{"paused":true}`, 401},
		{"not a pause", "Bearer tok", `{"pause":true}`, 400},
		{"two values", "Bearer tok", `{"paused":true} {}`, 400},
		{"before the run: kept for it", "Bearer tok", `{"paused":true}`, 202},
	} {
		if rec := do(t, h, "PUT", "/pause", c.auth, c.body); rec.Code != c.want {
			t.Errorf("%s: PUT /pause = %d %s, want %d", c.name, rec.Code, rec.Body, c.want)
		}
	}
	run, err := vacuum.NewBatch(vacuum.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s.setRun(run)
	progress := func() runnerwire.Progress {
		var p runnerwire.Progress
		if err := json.Unmarshal(do(t, h, "GET", "/progress", "", "").Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := progress(); !p.Paused {
		t.Fatalf("the pause sent before the run did not apply: %+v", p)
	}
	time.Sleep(30 * time.Millisecond)
	if rec := do(t, h, "PUT", "/pause", "Bearer tok", `{"paused":false}`); rec.Code != 200 {
		t.Fatalf("PUT /pause false = %d %s", rec.Code, rec.Body)
	}
	if p := progress(); p.Paused || p.PausedSeconds < 0.03 {
		t.Errorf("after resume: paused %v for %.3fs, want false after at least 0.03s", p.Paused, p.PausedSeconds)
	}
	s.finish()
	if rec := do(t, h, "PUT", "/pause", "Bearer tok", `{"paused":true}`); rec.Code != 409 {
		t.Errorf("PUT /pause after the end = %d, want 409", rec.Code)
	}
}
