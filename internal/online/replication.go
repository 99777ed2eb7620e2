package online

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// replicationQuery reads, for every standby the primary streams to, what it has replayed
// (or flushed, or been sent, the first of them known) and its replay lag, next to the
// primary's current WAL position. Casts to text make both servers answer alike: the engine
// server has its LSNs and intervals as text already, PostgreSQL has pg_lsn and interval.
// On PostgreSQL, a role without pg_read_all_stats sees NULL positions of other roles'
// senders; those standbys count with no lag.
const replicationQuery = `SELECT pg_current_wal_lsn()::text, coalesce(replay_lsn, flush_lsn, sent_lsn)::text,
	replay_lag::text FROM pg_stat_replication`

// replicationNow is one poll's reading of pg_stat_replication: the number of standbys and
// the largest lag in bytes and seconds among them.
type replicationNow struct {
	standbys   int64
	lagBytes   int64
	lagSeconds float64
}

// readReplication reads the standbys' lag; ok is false when the view could not be read (a
// standby as the target: pg_current_wal_lsn() is refused in recovery). A primary with no
// standby gives no row: then pg_current_wal_lsn() is not even evaluated.
func (r *Run) readReplication(ctx context.Context) (replicationNow, bool) {
	rows, err := r.ctl.Query(ctx, replicationQuery)
	if err != nil {
		return replicationNow{}, false
	}
	type row struct {
		current          string
		replayed, lagTxt *string
	}
	got, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
		var x row
		err := cr.Scan(&x.current, &x.replayed, &x.lagTxt)
		return x, err
	})
	if err != nil {
		return replicationNow{}, false
	}
	now := replicationNow{standbys: int64(len(got))}
	for _, x := range got {
		cur, err := parseLSN(x.current)
		if err != nil {
			return replicationNow{}, false
		}
		if x.replayed != nil {
			if at, err := parseLSN(*x.replayed); err == nil && cur > at {
				now.lagBytes = max(now.lagBytes, int64(cur-at))
			}
		}
		if x.lagTxt != nil {
			if s, err := parseInterval(*x.lagTxt); err == nil {
				now.lagSeconds = max(now.lagSeconds, s)
			}
		}
	}
	return now, true
}

// noteReplication folds one poll's reading into the run's figures: now replaced, the
// maxima kept. Nothing is reported until a standby has been seen.
func (r *Run) noteReplication(now replicationNow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replication == nil {
		if now.standbys == 0 {
			return
		}
		r.replication = &runnerwire.Replication{}
	}
	rp := r.replication
	rp.Standbys, rp.LagBytes, rp.LagSeconds = now.standbys, now.lagBytes, now.lagSeconds
	rp.MaxLagBytes, rp.MaxLagSeconds = max(rp.MaxLagBytes, now.lagBytes), max(rp.MaxLagSeconds, now.lagSeconds)
}

func copyReplication(rp *runnerwire.Replication) *runnerwire.Replication {
	if rp == nil {
		return nil
	}
	c := *rp
	return &c
}

// parseLSN reads a WAL position in pg_lsn's text form (16/B374D848).
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("WAL position %q: want two hexadecimal halves separated by /", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// parseInterval reads a lag as PostgreSQL prints an interval in its default style
// ("00:00:01.25", "2 days 03:04:05.5") and returns its seconds.
func parseInterval(s string) (float64, error) {
	var secs float64
	fields := strings.Fields(s)
	for len(fields) >= 2 {
		n, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("interval %q: %w", s, err)
		}
		unit := map[string]float64{"day": 86400, "days": 86400, "hour": 3600, "hours": 3600,
			"min": 60, "mins": 60, "sec": 1, "secs": 1}[fields[1]]
		if unit == 0 {
			return 0, fmt.Errorf("interval %q: unit %q", s, fields[1])
		}
		secs += n * unit
		fields = fields[2:]
	}
	if len(fields) == 1 {
		parts := strings.Split(strings.TrimPrefix(fields[0], "-"), ":")
		if len(parts) != 3 {
			return 0, fmt.Errorf("interval %q: want HH:MM:SS", s)
		}
		var hms float64
		for _, p := range parts {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return 0, fmt.Errorf("interval %q: %w", s, err)
			}
			hms = hms*60 + v
		}
		if strings.HasPrefix(fields[0], "-") {
			hms = -hms
		}
		secs += hms
	}
	return secs, nil
}
