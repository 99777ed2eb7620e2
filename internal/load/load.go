// Package load is the load generator of `vacuum-runner load`: point lookups and updates at a
// fixed rate on a table of its own, so an online vacuum has a foreground to be measured
// against. It reports its own, client-side latency percentiles and the statements that
// failed, each interval and in total.
//
// The table (id bigint PRIMARY KEY, n bigint) is created when missing and filled with the
// ids 1..Rows; lookups read one random id, updates add 1 to one random id's n (each update
// leaves one dead tuple for the vacuum). Statements are paced open-loop: one is due every
// 1/Rate seconds whatever the server's latency, taken by the first free connection; when
// every connection is busy and one statement per connection already waits, the due
// statement is dropped and counted as late, so a slow server shows as a lower achieved rate
// rather than a growing queue. Sessions carry the
// application_name "vacuumops-load", which the engine server counts as foreground.
package load

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
)

// ApplicationName is the application_name of the load's sessions (not vacuum-runner's, so
// the engine server counts them as foreground).
const ApplicationName = "vacuumops-load"

// Config says where to send what load.
type Config struct {
	// Target is the server and the credentials, with the runner's connection conventions.
	Target online.Target
	// Table is the load's table (created and filled when missing).
	Table string
	// Rows is the number of ids the table holds and the statements pick from.
	Rows int64
	// Rate is the statements per second sent (lookups and updates together).
	Rate float64
	// UpdatePercent is the share of updates among the statements, 0 to 100.
	UpdatePercent int
	// Connections is the number of sessions the statements are spread over.
	Connections int
	// Duration ends the load after it; 0 runs until ctx is cancelled.
	Duration time.Duration
	// ReportEvery is the interval of OnReport calls (0: none until the end).
	ReportEvery time.Duration
	// OnReport, when set, is called every ReportEvery with the figures so far.
	OnReport func(Report)
	// Seed makes the ids picked reproducible (0: random).
	Seed uint64
}

// Figures are the load's statements over a span, with their client-side latency (from
// sending the statement to its result) in microseconds.
type Figures struct {
	Seconds             float64 `json:"seconds"`
	Statements          int64   `json:"statements"`
	Lookups             int64   `json:"lookups"`
	Updates             int64   `json:"updates"`
	Failed              int64   `json:"failed"`
	Late                int64   `json:"late"`
	StatementsPerSecond float64 `json:"statementsPerSecond"`
	P50Microseconds     int64   `json:"p50Microseconds"`
	P90Microseconds     int64   `json:"p90Microseconds"`
	P99Microseconds     int64   `json:"p99Microseconds"`
	MaxMicroseconds     int64   `json:"maxMicroseconds"`
}

// Report is the last interval's figures and the whole run's. Statements counts the
// successful ones (Lookups + Updates); Updates are committed updates (each is its own
// transaction); Failed are statements that returned an error; Late are due statements
// dropped because every connection was busy.
type Report struct {
	Interval Figures `json:"interval"`
	Total    Figures `json:"total"`
	// Final marks the report written when the load stops.
	Final bool `json:"final"`
	// LastError is the last failed statement's error, if any.
	LastError string `json:"lastError"`
}

// Histogram range: 1 µs to 1 minute, 3 significant digits (as the engine server's).
const (
	lowestMicros  = 1
	highestMicros = int64(time.Minute / time.Microsecond)
	sigFigs       = 3
)

// counts are one span's tallies.
type counts struct {
	start                          time.Time
	lookups, updates, failed, late int64
	h                              *hdrhistogram.Histogram
}

func newCounts(at time.Time) *counts {
	return &counts{start: at, h: hdrhistogram.New(lowestMicros, highestMicros, sigFigs)}
}

func (c *counts) figures(now time.Time) Figures {
	secs := now.Sub(c.start).Seconds()
	f := Figures{Seconds: secs, Statements: c.lookups + c.updates, Lookups: c.lookups, Updates: c.updates,
		Failed: c.failed, Late: c.late}
	if secs > 0 {
		f.StatementsPerSecond = float64(f.Statements) / secs
	}
	if c.h.TotalCount() > 0 {
		f.P50Microseconds, f.P90Microseconds = c.h.ValueAtQuantile(50), c.h.ValueAtQuantile(90)
		f.P99Microseconds, f.MaxMicroseconds = c.h.ValueAtQuantile(99), c.h.Max()
	}
	return f
}

// tally is the run's counts: the current interval's and the total.
type tally struct {
	mu              sync.Mutex
	interval, total *counts
	lastErr         error
}

func (t *tally) record(update bool, d time.Duration, err error) {
	us := min(max(d.Microseconds(), lowestMicros), highestMicros)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range []*counts{t.interval, t.total} {
		switch {
		case err != nil:
			c.failed++
		case update:
			c.updates++
		default:
			c.lookups++
		}
		if err == nil {
			_ = c.h.RecordValue(us) // in range by construction
		}
	}
	if err != nil {
		t.lastErr = err
	}
}

func (t *tally) lateOne() {
	t.mu.Lock()
	t.interval.late++
	t.total.late++
	t.mu.Unlock()
}

// report returns the figures so far and starts a new interval.
func (t *tally) report(now time.Time, final bool) Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Report{Interval: t.interval.figures(now), Total: t.total.figures(now), Final: final}
	if t.lastErr != nil {
		r.LastError = t.lastErr.Error()
	}
	t.interval = newCounts(now)
	return r
}

// Check returns the first thing wrong with c.
func (c Config) Check() error {
	switch {
	case c.Table == "":
		return &online.FieldError{Field: "table", Message: "required"}
	case c.Rows < 1:
		return &online.FieldError{Field: "rows", Message: fmt.Sprintf("must be at least 1, got %d", c.Rows)}
	case c.Rate <= 0:
		return &online.FieldError{Field: "rate", Message: fmt.Sprintf("must be above 0, got %g", c.Rate)}
	case c.UpdatePercent < 0 || c.UpdatePercent > 100:
		return &online.FieldError{Field: "updatePercent", Message: fmt.Sprintf("must be 0 to 100, got %d", c.UpdatePercent)}
	case c.Connections < 1:
		return &online.FieldError{Field: "connections", Message: fmt.Sprintf("must be at least 1, got %d", c.Connections)}
	}
	return nil
}

// Run prepares the table, then sends the load until Duration passes or ctx is cancelled, and
// returns the final report. Cancelling ctx is the normal way to stop: the statements in
// flight finish, and Run returns their report with no error. Errors are the connection's
// and the table's preparation; failed statements are counted, not returned.
func Run(ctx context.Context, c Config) (Report, error) {
	if err := c.Check(); err != nil {
		return Report{}, err
	}
	cfg, err := c.Target.Config()
	if err != nil {
		return Report{}, err
	}
	cfg.RuntimeParams["application_name"] = ApplicationName
	conns := make([]*pgx.Conn, 0, c.Connections)
	defer func() {
		for _, conn := range conns {
			_ = conn.Close(context.Background()) // the figures are what matter
		}
	}()
	for range c.Connections {
		conn, err := online.Connect(ctx, c.Target, cfg.Copy())
		if err != nil {
			return Report{}, err
		}
		conns = append(conns, conn)
	}
	if err := prepare(ctx, conns[0], c.Table, c.Rows); err != nil {
		return Report{}, err
	}

	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	start := time.Now()
	t := &tally{interval: newCounts(start), total: newCounts(start)}
	stop := ctx.Done()
	if c.Duration > 0 {
		dctx, cancel := context.WithDeadline(ctx, start.Add(c.Duration))
		defer cancel()
		stop = dctx.Done()
	}
	// Statements run on a context that is never cancelled: a statement in flight when the
	// load stops finishes and is counted (cancelling a pgx query closes its connection).
	work := context.WithoutCancel(ctx)
	// A due statement waits for a connection behind at most one per connection, else it
	// is late.
	due := make(chan bool, c.Connections)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendLoop(work, conn, c, rand.New(rand.NewPCG(seed, uint64(i))), due, t)
		}()
	}

	var reports <-chan time.Time
	if c.ReportEvery > 0 && c.OnReport != nil {
		tick := time.NewTicker(c.ReportEvery)
		defer tick.Stop()
		reports = tick.C
	}
	pick := rand.New(rand.NewPCG(seed, ^uint64(0)))
	every := time.Duration(float64(time.Second) / c.Rate)
	next := start
	timer := time.NewTimer(0)
	defer timer.Stop()
loop:
	for {
		select {
		case <-stop:
			break loop
		case now := <-reports:
			c.OnReport(t.report(now, false))
		case <-timer.C:
			now := time.Now()
			// Every statement due by now is sent or counted late: the schedule does not
			// slip when the server is slow.
			for ; !next.After(now); next = next.Add(every) {
				select {
				case due <- pick.IntN(100) < c.UpdatePercent:
				default:
					t.lateOne()
				}
			}
			timer.Reset(time.Until(next))
		}
	}
	close(due)
	wg.Wait()
	return t.report(time.Now(), true), nil
}

// sendLoop runs the due statements on conn until due is closed.
func sendLoop(ctx context.Context, conn *pgx.Conn, c Config, rnd *rand.Rand, due <-chan bool, t *tally) {
	lookup := "SELECT n FROM " + pgx.Identifier{c.Table}.Sanitize() + " WHERE id = $1"
	update := "UPDATE " + pgx.Identifier{c.Table}.Sanitize() + " SET n = n + 1 WHERE id = $1"
	for isUpdate := range due {
		id := rnd.Int64N(c.Rows) + 1
		began := time.Now()
		var err error
		if isUpdate {
			_, err = conn.Exec(ctx, update, id)
		} else {
			var n int64
			err = conn.QueryRow(ctx, lookup, id).Scan(&n)
			if errors.Is(err, pgx.ErrNoRows) {
				err = fmt.Errorf("id %d of %s is missing", id, c.Table)
			}
		}
		t.record(isUpdate, time.Since(began), err)
	}
}

// prepare creates table when missing and fills it with the ids 1..rows it lacks.
func prepare(ctx context.Context, conn *pgx.Conn, table string, rows int64) error {
	ident := pgx.Identifier{table}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
		return fmt.Errorf("look up table %s: %w", table, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+ident+" (id bigint PRIMARY KEY, n bigint NOT NULL)"); err != nil {
			return fmt.Errorf("create table %s: %w", table, err)
		}
	}
	var have int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+ident).Scan(&have); err != nil {
		return fmt.Errorf("count the rows of %s: %w", table, err)
	}
	if have < rows {
		// The table is the load's own: its ids are 1..have.
		if _, err := conn.Exec(ctx, "INSERT INTO "+ident+" SELECT g, 0 FROM generate_series($1::bigint, $2::bigint) g",
			have+1, rows); err != nil {
			return fmt.Errorf("fill table %s with ids %d to %d: %w", table, have+1, rows, err)
		}
	}
	return nil
}
