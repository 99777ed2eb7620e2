package replication

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/server/sql"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// Views are the primary's system views: pg_stat_replication (one row per stream, with
// PostgreSQL's columns; LSNs in pg_lsn's text form and lags in interval's, typed text
// since the server has neither type yet) and pg_replication_slots.
func (p *Primary) Views() map[string]sql.View {
	col := func(name string, t *types.T) sql.ViewColumn { return sql.ViewColumn{Name: name, Type: t} }
	return map[string]sql.View{
		"pg_stat_replication": {
			Columns: []sql.ViewColumn{col("pid", types.Int4), col("usename", types.Text), col("application_name", types.Text),
				col("client_addr", types.Text), col("backend_start", types.Timestamptz), col("state", types.Text),
				col("sent_lsn", types.Text), col("write_lsn", types.Text), col("flush_lsn", types.Text),
				col("replay_lsn", types.Text), col("write_lag", types.Text), col("flush_lag", types.Text),
				col("replay_lag", types.Text), col("sync_state", types.Text), col("reply_time", types.Timestamptz)},
			Rows: func() [][]any {
				var out [][]any
				for _, s := range p.Standbys() {
					sync := "async"
					if s.AppName == p.cfg.SynchronousStandby {
						sync = "sync"
					}
					out = append(out, []any{int64(s.PID), s.User, s.AppName, nilIfEmpty(s.ClientAddr), s.BackendStart.UTC(),
						s.State, lsnText(s.Sent), lsnText(s.Write), lsnText(s.Flush), lsnText(s.Replay),
						intervalText(s.WriteLag), intervalText(s.FlushLag), intervalText(s.ReplayLag), sync,
						timeOrNull(s.ReplyTime)})
				}
				return out
			},
		},
		"pg_replication_slots": {
			Columns: []sql.ViewColumn{col("slot_name", types.Text), col("slot_type", types.Text), col("temporary", types.Bool),
				col("active", types.Bool), col("active_pid", types.Int4), col("restart_lsn", types.Text),
				col("wal_status", types.Text), col("safe_wal_size", types.Int8)},
			Rows: func() [][]any {
				end := p.log.FlushedLSN()
				var out [][]any
				for _, sl := range p.slots.List() {
					var pid, safe any
					if sl.Active != 0 {
						pid = int64(sl.Active)
					}
					status := "reserved"
					if sl.Invalidated {
						status = "lost"
					} else if p.cfg.MaxSlotWALKeepSize >= 0 && sl.RestartLSN != 0 {
						safe = p.cfg.MaxSlotWALKeepSize - behind(end, sl.RestartLSN)
					}
					var restart any
					if sl.RestartLSN != 0 && !sl.Invalidated {
						restart = FormatLSN(sl.RestartLSN)
					}
					out = append(out, []any{sl.Name, "physical", sl.Temporary, sl.Active != 0, pid, restart, status, safe})
				}
				return out
			},
		},
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func lsnText(l wal.LSN) any {
	if l == 0 {
		return nil
	}
	return FormatLSN(l)
}

// intervalText renders a lag as PostgreSQL prints an interval under seconds and hours
// (00:00:00.025270); nil when not known.
func intervalText(d time.Duration) any {
	if d < 0 {
		return nil
	}
	us := d.Microseconds()
	h, m, s := us/3_600_000_000, us/60_000_000%60, us/1_000_000%60
	return fmt.Sprintf("%02d:%02d:%02d.%06d", h, m, s, us%1_000_000)
}

// Views are the standby's system views: pg_stat_wal_receiver (one row while the
// receiver runs, with PostgreSQL's columns; LSNs as pg_lsn text).
func (r *Receiver) Views() map[string]sql.View {
	col := func(name string, t *types.T) sql.ViewColumn { return sql.ViewColumn{Name: name, Type: t} }
	return map[string]sql.View{
		"pg_stat_wal_receiver": {
			Columns: []sql.ViewColumn{col("pid", types.Int4), col("status", types.Text), col("written_lsn", types.Text),
				col("flushed_lsn", types.Text), col("received_tli", types.Int4), col("last_msg_receipt_time", types.Timestamptz),
				col("latest_end_lsn", types.Text), col("slot_name", types.Text), col("sender_host", types.Text),
				col("sender_port", types.Int4)},
			Rows: func() [][]any {
				st := r.Status()
				status := "streaming"
				if !st.Connected {
					status = "waiting"
				}
				var port any
				if p, err := strconv.Atoi(r.cfg.Primary.Port); err == nil {
					port = int64(p)
				}
				return [][]any{{int64(os.Getpid()), status, lsnText(st.Received), lsnText(st.Flushed), int64(1),
					timeOrNull(st.LastMessage), lsnText(st.LatestEnd), nilIfEmpty(r.cfg.Slot), r.cfg.Primary.Host, port}}
			},
		},
	}
}
