package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/replication"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// standbyFlags are serve's standby flags.
type standbyFlags struct {
	primary           primaryFlags
	name, slot        string
	basebackupIfEmpty bool
	maxStreamingDelay time.Duration
}

func (f *standbyFlags) register(fs *pflag.FlagSet) {
	f.primary.register(fs, "standby-of", "run as a standby of the primary at HOST:PORT (receives its WAL into --data)")
	fs.StringVar(&f.name, "name", "", "the standby's name, sent as its application_name (--synchronous-standby on the primary)")
	fs.StringVar(&f.slot, "slot", "", "the primary's physical replication slot to stream from")
	fs.BoolVar(&f.basebackupIfEmpty, "basebackup-if-empty", false, "take a base backup of the primary first when --data is absent or empty")
	fs.DurationVar(&f.maxStreamingDelay, "max-standby-streaming-delay", 30*time.Second,
		"how long replay waits for standby queries that still see rows a record removes before cancelling them with 40001 (-1s = no limit)")
}

// runStandby runs serve --standby-of: a hot standby. The WAL receiver streams the
// primary's WAL into --data (after a base backup with --basebackup-if-empty), the engine
// replays it as it becomes durable (engine.OpenStandby, DB.Follow), and --listen serves
// read-only queries (writes get 25006, pg_is_in_recovery() is true, pg_stat_wal_receiver
// shows the receiver) until a signal. Serve without --standby-of on the same directory
// is a promotion: its Open replays what was received and the directory becomes writable.
func runStandby(ctx context.Context, f *serveFlags, stderr io.Writer) error {
	if f.data == "" {
		return usagef("serve: --data is required")
	}
	name := f.standby.name
	if name == "" {
		name = "engine-server standby"
	}
	cc, err := f.standby.primary.config("serve", "standby-of", name)
	if err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "engine-server: "+format+"\n", a...) }
	var db atomic.Pointer[engine.DB]
	r := replication.NewReceiver(replication.StandbyConfig{Primary: cc, Dir: f.data, BaseBackupIfEmpty: f.standby.basebackupIfEmpty,
		Slot: f.standby.slot, Logf: logf, Replayed: func() wal.LSN {
			if d := db.Load(); d != nil {
				return d.ReplayedLSN()
			}
			return 0
		}, Flushed: func() {
			if d := db.Load(); d != nil {
				d.WakeFollow()
			}
		}})
	if err := r.Prepare(ctx); err != nil {
		return err
	}
	if err := f.upgradeData(logf); err != nil {
		return err
	}
	d, err := engine.OpenStandby(f.data, engine.Options{BufferPoolBytes: f.bufferPool.Value.Value(), Direct: f.directIO,
		MaxStandbyStreamingDelay: f.standby.maxStreamingDelay, Logf: func(format string, a ...any) { logf("engine: "+format, a...) }})
	if err != nil {
		return err
	}
	db.Store(d)
	cfg.DB, cfg.Logf, cfg.Views = d, logf, r.Views()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return errors.Join(fmt.Errorf("listen on %s: %w", f.listen, err), d.Close())
	}
	srv := wire.New(cfg)
	if f.metricsListen != "" {
		mln, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			return errors.Join(fmt.Errorf("listen on %s: %w", f.metricsListen, err), ln.Close(), d.Close())
		}
		reg := prometheus.NewRegistry()
		for metric, v := range map[string]func() float64{
			"engine_server_wal_receiver_received_lsn": func() float64 { return float64(r.Status().Received) },
			"engine_server_wal_receiver_flushed_lsn":  func() float64 { return float64(r.Status().Flushed) },
			"engine_server_wal_receiver_primary_end_lsn": func() float64 {
				return float64(r.Status().LatestEnd)
			},
			"engine_server_wal_receiver_connected": func() float64 {
				if r.Status().Connected {
					return 1
				}
				return 0
			},
			"engine_server_standby_replayed_lsn": func() float64 { return float64(d.ReplayedLSN()) },
			"engine_server_standby_conflict_cancels": func() float64 {
				return float64(d.StandbyCancels())
			},
		} {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metric,
				Help: "The standby's WAL receiver and replay (pg_stat_wal_receiver's figures; LSNs as byte positions)."}, v))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ms.Serve(mln) }()
		defer func() { _ = ms.Close() }()
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	recvErr := make(chan error, 1)
	go func() { recvErr <- r.Run(rctx) }()
	followErr := make(chan error, 1)
	go func() {
		followErr <- d.Follow(rctx, func() wal.LSN { return r.Status().Flushed }, 0)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logf("standby of %s (name %q, data %s): receiving and replaying WAL from %s; read-only queries on %s",
		f.standby.primary.from, name, f.data, replication.FormatLSN(d.ReplayedLSN()), ln.Addr())
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-recvErr:
		runErr = err
	case err := <-followErr:
		runErr = fmt.Errorf("standby replay stopped: %w", err)
	case err := <-serveErr:
		runErr = err
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := d.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("final restartpoint: %w", err))
	}
	logf("standby stopped at %s flushed, %s replayed", replication.FormatLSN(r.Status().Flushed), replication.FormatLSN(d.ReplayedLSN()))
	if errors.Is(runErr, wire.ErrServerClosed) || errors.Is(runErr, context.Canceled) {
		return nil
	}
	return runErr
}
