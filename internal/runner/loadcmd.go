package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/load"
	"github.com/vacuumops/vacuum-operator/internal/online"
)

// This file is `vacuum-runner load`: the load generator of package load, for the samples,
// the demo and the online e2e (a foreground for an online vacuum to be measured against).

// flagOfLoadField names the flag of a package load field.
var flagOfLoadField = map[string]string{
	"table": "--table", "rows": "--rows", "rate": "--rate", "updatePercent": "--update-percent",
	"connections": "--connections",
}

// serviceEnv is the Service environment variables' prefix of a Service name, as a kubelet
// writes it: upper case, dashes as underscores (shop-db -> SHOP_DB).
func serviceEnv(service string) string {
	return strings.ToUpper(strings.ReplaceAll(service, "-", "_"))
}

// serviceAddress is HOST:PORT of service from its environment variables
// (<SERVICE>_SERVICE_HOST and <SERVICE>_SERVICE_PORT).
func serviceAddress(service string, getenv func(string) string) (string, error) {
	p := serviceEnv(service)
	host, port := getenv(p+"_SERVICE_HOST"), getenv(p+"_SERVICE_PORT")
	if host == "" || port == "" {
		return "", usagef("--service %s: %s_SERVICE_HOST and %s_SERVICE_PORT are not both set (is the Service in the pod's namespace, created before the pod?)", service, p, p)
	}
	return net.JoinHostPort(host, port), nil
}

func cmdLoad(ctx context.Context, args []string, env Env) error {
	fs := cliflag.NewSet("load")
	sf := addServerFlags(fs)
	service := fs.String("service", "", "reach the server through this Service's environment variables (<SERVICE>_SERVICE_HOST/PORT) instead of --server")
	table := fs.String("table", "vacuumops_load", "the load's table (created and filled with ids 1..--rows when missing)")
	rows := fs.Int64("rows", 10000, "ids in the table")
	rate := fs.Float64("rate", 200, "statements per second (lookups and updates together)")
	updates := fs.Int("update-percent", 50, "share of updates among the statements, 0 to 100")
	conns := fs.Int("connections", 4, "sessions the statements are spread over")
	duration := fs.Duration("duration", 0, "stop after this long (0: until SIGTERM)")
	every := fs.Duration("report-every", 10*time.Second, "interval of the reports on stdout")
	asJSON := fs.Bool("json", false, "write each report as one JSON line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	addr := sf.server
	switch {
	case addr != "" && *service != "":
		return usagef("give --server or --service, not both")
	case *service != "":
		a, err := serviceAddress(*service, os.Getenv)
		if err != nil {
			return err
		}
		addr = a
	case addr == "":
		return usagef("--server HOST:PORT or --service NAME is required")
	}
	t := online.Target{Address: addr, Database: sf.database, User: sf.user, PasswordFile: sf.passwordFile,
		SSLMode: sf.sslmode, SSLRootCert: sf.sslrootcert}
	write := func(r load.Report) {
		if err := writeLoadReport(env, r, *asJSON); err != nil {
			_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner load: write report: %v\n", err)
		}
	}
	rep, err := load.Run(ctx, load.Config{Target: t, Table: *table, Rows: *rows, Rate: *rate, UpdatePercent: *updates,
		Connections: *conns, Duration: *duration, ReportEvery: *every, OnReport: write})
	if err != nil {
		return loadFieldsNamed(err)
	}
	// A SIGTERM is how a load is meant to stop: the final report, exit 0.
	write(rep)
	return nil
}

// loadFieldsNamed names the flags of package load's and package online's field errors.
func loadFieldsNamed(err error) error {
	if fe, ok := err.(*online.FieldError); ok && flagOfLoadField[fe.Field] != "" {
		return usagef("%s: %s", flagOfLoadField[fe.Field], fe.Message)
	}
	return fieldsNamed(err, true)
}

// writeLoadReport writes one report: a JSON line, or a line for people.
func writeLoadReport(env Env, r load.Report, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(append(b, '\n'))
		return err
	}
	f, what := r.Interval, "last"
	if r.Final {
		f, what = r.Total, "total"
	}
	us := func(v int64) string { return (time.Duration(v) * time.Microsecond).String() }
	_, err := fmt.Fprintf(env.Stdout, "%s %.1fs: %d statements (%.1f/s; %d lookups, %d updates), %d failed, %d late, p50 %s p90 %s p99 %s max %s\n",
		what, f.Seconds, f.Statements, f.StatementsPerSecond, f.Lookups, f.Updates, f.Failed, f.Late,
		us(f.P50Microseconds), us(f.P90Microseconds), us(f.P99Microseconds), us(f.MaxMicroseconds))
	if err == nil && r.Final && r.LastError != "" {
		_, err = fmt.Fprintf(env.Stdout, "last error: %s\n", r.LastError)
	}
	return err
}
