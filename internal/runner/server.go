package runner

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// maxThrottleBody bounds a PUT /throttle body.
const maxThrottleBody = 16 << 10

// runState is what the HTTP handlers see of a run: nothing yet (opening the data directory),
// a run in progress, or a finished one. Safe for concurrent use.
type runState struct {
	start  time.Time
	tables int
	logf   func(string, ...any)

	mu       sync.Mutex
	run      active
	finished bool
	pending  *runnerwire.Limits // a PUT /throttle received before the run started
	// pendingAdaptive is that PUT's adaptive throttle (an online run applies it at its start).
	pendingAdaptive *runnerwire.AdaptiveTargets
	paused          bool  // a PUT /pause {"paused": true} received before the run started
	updates         int64 // throttle changes applied
}

// setRun publishes the engine's run once it exists.
func (s *runState) setRun(r *vacuum.Batch) { s.setActive(engineRun{r}) }

// setActive publishes a run (the engine's or an online one) once it exists.
func (s *runState) setActive(r active) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run = r
	if p, ok := r.(pauser); ok && s.paused {
		p.SetPaused(true)
	}
}

// stderr is a writer into the run's log (logf), for messages of shared code.
func (s *runState) stderr() io.Writer { return logWriter(s.logf) }

// logWriter writes each Write as one log line.
type logWriter func(string, ...any)

func (l logWriter) Write(b []byte) (int, error) {
	l("%s", strings.TrimRight(strings.TrimPrefix(string(b), "vacuum-runner: "), "\n"))
	return len(b), nil
}

// takePending returns (and clears) a throttle PUT before the run started.
func (s *runState) takePending() *runnerwire.Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = nil
	return p
}

// takePendingAdaptive returns (and clears) the adaptive throttle of a PUT /throttle before
// the run started.
func (s *runState) takePendingAdaptive() *runnerwire.AdaptiveTargets {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pendingAdaptive
	s.pendingAdaptive = nil
	return p
}

func (s *runState) finish() {
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
}

// progress is the body of GET /progress now.
func (s *runState) progress() runnerwire.Progress {
	s.mu.Lock()
	r := s.run
	s.mu.Unlock()
	if r == nil {
		return initialProgress(s.tables, s.start)
	}
	return r.Progress()
}

// newHandler serves /progress, /metrics, /healthz and PUT /throttle on one port. token is
// the control token; empty disables /throttle.
func newHandler(s *runState, token []byte) http.Handler {
	h, _ := newHandlers(s, token, true)
	return h
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n") // a client gone away is not our error
}

// newHandlers returns the control handler (/progress, /healthz, PUT /throttle, and /metrics
// when metricsOnControl) and the metrics handler (/metrics, /healthz) for a separate port.
func newHandlers(s *runState, token []byte, metricsOnControl bool) (control, metrics http.Handler) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/progress", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			httpError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		writeHTTPJSON(w, http.StatusOK, s.progress())
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&progressCollector{s: s})
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	mmux := http.NewServeMux()
	mmux.HandleFunc("/healthz", healthz)
	mmux.Handle("/metrics", metricsHandler)
	if metricsOnControl {
		mux.Handle("/metrics", metricsHandler)
	}
	var sum [32]byte
	if len(token) > 0 {
		sum = sha256.Sum256(token)
	}
	// guarded guards the endpoints that change the run: PUT only, with the run's bearer token.
	guarded := func(put func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if len(token) == 0 {
				httpError(w, http.StatusForbidden, "the control endpoint is disabled (no --control-token-file)")
				return
			}
			if r.Method != http.MethodPut {
				w.Header().Set("Allow", http.MethodPut)
				httpError(w, http.StatusMethodNotAllowed, "use PUT")
				return
			}
			if !authorized(r, sum) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="vacuum-runner"`)
				httpError(w, http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
			put(w, r)
		}
	}
	mux.HandleFunc("/throttle", guarded(s.putThrottle))
	mux.HandleFunc("/pause", guarded(s.putPause))
	return mux, mmux
}

// putPause pauses or resumes the run: {"paused": true} holds every worker at its next delay
// point until {"paused": false}.
func (s *runState) putPause(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxThrottleBody))
	dec.DisallowUnknownFields()
	var p runnerwire.Pause
	if err := dec.Decode(&p); err != nil || dec.More() {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("body is not one {\"paused\": true|false}: %v", err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.finished:
		httpError(w, http.StatusConflict, "the run has finished")
		return
	case s.run == nil:
		s.paused = p.Paused
		s.logf("paused %v before the run started", p.Paused)
		writeHTTPJSON(w, http.StatusAccepted, p)
		return
	}
	ps, ok := s.run.(pauser)
	if !ok {
		httpError(w, http.StatusConflict, "this run cannot be paused (a server's VACUUM cannot be held at a delay point)")
		return
	}
	s.paused = p.Paused
	if ps.SetPaused(p.Paused) {
		s.logf("paused %v", p.Paused)
	}
	writeHTTPJSON(w, http.StatusOK, p)
}

// authorized compares the request's bearer token with the expected one in constant time
// (hashing both first, so that not even the length leaks).
func authorized(r *http.Request, want [32]byte) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// putThrottle applies a Throttle body: absent fields take their defaults.
func (s *runState) putThrottle(w http.ResponseWriter, r *http.Request) {
	body := http.MaxBytesReader(w, r.Body, maxThrottleBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var t runnerwire.Throttle
	if err := dec.Decode(&t); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxThrottleBody))
			return
		}
		httpError(w, http.StatusBadRequest, "body is not a Throttle: "+err.Error())
		return
	}
	if dec.More() {
		httpError(w, http.StatusBadRequest, "body holds more than one JSON value")
		return
	}
	l, err := t.Over(runnerwire.DefaultLimits(), "throttle")
	if err != nil {
		httpError(w, http.StatusBadRequest, oneLine(err))
		return
	}
	a, err := t.AdaptiveOver(runnerwire.DefaultAdaptive(), "throttle")
	if err != nil {
		httpError(w, http.StatusBadRequest, oneLine(err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.finished:
		httpError(w, http.StatusConflict, "the run has finished")
		return
	case s.run == nil:
		s.pending = &l
		s.pendingAdaptive = &a
		s.logf("throttle set before the run started: %s", describeLimits(l))
		writeHTTPJSON(w, http.StatusAccepted, l.Throttle())
		return
	}
	ad, adapts := s.run.(adapter)
	if !a.Off() && !adapts {
		httpError(w, http.StatusBadRequest, "throttle.adaptive: needs a server target: an offline run has no foreground or standby to adapt to")
		return
	}
	if err := s.run.UpdateThrottle(l); err != nil {
		httpError(w, http.StatusBadRequest, oneLine(err))
		return
	}
	if adapts {
		if err := ad.UpdateAdaptive(a); err != nil {
			httpError(w, http.StatusBadRequest, oneLine(err))
			return
		}
	}
	s.updates++
	when := ""
	if s.run.ThrottleApplies() == runnerwire.ThrottleAppliesNextTable {
		when = " (from the next table: the server cannot re-throttle a running VACUUM)"
	}
	s.logf("throttle changed%s: %s", when, describeLimits(l))
	writeHTTPJSON(w, http.StatusOK, l.Throttle())
}

// describeLimits is a one-line description of limits for the log.
func describeLimits(l runnerwire.Limits) string {
	return fmt.Sprintf("cost delay %v, cost limit %d, page costs %d/%d/%d, read %s/s, write %s/s, WAL %s/s",
		l.CostDelay, l.CostLimit, l.PageHitCost, l.PageMissCost, l.PageDirtyCost,
		quantity(l.MaxReadBytesPerSecond), quantity(l.MaxWriteBytesPerSecond), quantity(l.MaxWALBytesPerSecond))
}

func writeHTTPJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n')) // a client gone away is not our error
}

// httpError answers with a JSON {"error": msg}.
func httpError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n')) // a client gone away is not our error
}
