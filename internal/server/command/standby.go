package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/vacuumops/vacuum-operator/internal/replication"
)

// standbyFlags are serve's standby flags.
type standbyFlags struct {
	primary           primaryFlags
	name, slot        string
	basebackupIfEmpty bool
}

func (f *standbyFlags) register(fs *pflag.FlagSet) {
	f.primary.register(fs, "standby-of", "run as a standby of the primary at HOST:PORT (receives its WAL into --data)")
	fs.StringVar(&f.name, "name", "", "the standby's name, sent as its application_name (--synchronous-standby on the primary)")
	fs.StringVar(&f.slot, "slot", "", "the primary's physical replication slot to stream from")
	fs.BoolVar(&f.basebackupIfEmpty, "basebackup-if-empty", false, "take a base backup of the primary first when --data is absent or empty")
}

// runStandby runs serve --standby-of: the WAL receiver, until a signal. The standby does
// not serve queries yet, and replays the WAL it received only when the directory is opened
// (serve without --standby-of: a promotion).
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
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "engine-server: "+format+"\n", a...) }
	r := replication.NewReceiver(replication.StandbyConfig{Primary: cc, Dir: f.data, BaseBackupIfEmpty: f.standby.basebackupIfEmpty,
		Slot: f.standby.slot, Logf: logf})
	if f.metricsListen != "" {
		mln, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", f.metricsListen, err)
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
		} {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metric,
				Help: "The standby's WAL receiver (pg_stat_wal_receiver's figures; LSNs as byte positions)."}, v))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ms.Serve(mln) }()
		defer func() { _ = ms.Close() }()
	}
	logf("standby of %s (name %q, data %s): receiving WAL", f.standby.primary.from, name, f.data)
	err = r.Run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	logf("standby stopped at %s flushed", replication.FormatLSN(r.Status().Flushed))
	return nil
}
