package bulkdata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// TwinSettings are appended to the PostgreSQL twin's postgresql.conf: the
// comparison's settings (a 128 MiB pool, 64 MiB for dead TIDs, no cost
// delay, durable commits, full-page writes, no autovacuum).
var TwinSettings = []string{
	"shared_buffers = 128MB",
	"maintenance_work_mem = 64MB",
	"vacuum_cost_delay = 0",
	"full_page_writes = on",
	"wal_level = replica",
	"max_wal_size = 1GB",
	"checkpoint_timeout = 5min",
	"fsync = on",
	"synchronous_commit = on",
	"autovacuum = off",
	"wal_compression = off",
}

// TwinOptions say where PostgreSQL 15 is and how its twin is made.
type TwinOptions struct {
	Bin       string // PostgreSQL's binaries (initdb, pg_ctl, psql)
	User      string // the unprivileged user the server runs as (we run as root)
	Port      int    // the port of its Unix socket (the server listens on no TCP address)
	Checksums bool   // initdb --data-checksums (our engine always checksums pages)
	Keep      bool   // Close leaves the cluster's directory in place
	Logf      func(format string, args ...any)
}

// Twin is the SQL twin of the table in a PostgreSQL 15 cluster built once
// as a template (StartTwin); each VacuumCold works on a copy of it.
type Twin struct {
	opt       TwinOptions
	base      string // owned by opt.User: the template, the copies, the socket and the log
	tmpl      string
	Conf      string // the settings appended to postgresql.conf
	Load      string // psql's output of the load (heap pages, block size)
	HeapPages int64
}

// StartTwin creates a cluster in a new temporary directory owned by
// opt.User and loads SQL(rows) into it (INSERT, two CREATE INDEX, DELETE by
// the rule, CHECKPOINT, no scan afterwards); the server is stopped after.
// It must run as root. Close removes the directory.
func StartTwin(ctx context.Context, rows int64, opt TwinOptions) (tw *Twin, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("bulkdata: the PostgreSQL twin needs root (the server runs as an unprivileged user, and the page cache is dropped)")
	}
	if opt.Logf == nil {
		opt.Logf = func(string, ...any) {}
	}
	u, err := user.Lookup(opt.User)
	if err != nil {
		return nil, fmt.Errorf("bulkdata: PostgreSQL user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp("", "pgtwin-")
	if err != nil {
		return nil, fmt.Errorf("bulkdata: %w", err)
	}
	tw = &Twin{opt: opt, base: base, tmpl: filepath.Join(base, "template")}
	defer func() {
		if err != nil {
			tw.Close()
			tw = nil
		}
	}()
	if err := os.Chown(base, uid, gid); err != nil {
		return nil, fmt.Errorf("bulkdata: %w", err)
	}
	if err := os.Chmod(base, 0o700); err != nil {
		return nil, fmt.Errorf("bulkdata: %w", err)
	}
	initArgs := []string{"-D", tw.tmpl, "-U", "postgres", "--no-instructions", "-E", "UTF8", "--locale", "C"}
	if opt.Checksums {
		initArgs = append(initArgs, "--data-checksums")
	}
	if _, err := tw.pg(ctx, "initdb", initArgs...); err != nil {
		return nil, err
	}
	tw.Conf = strings.Join(append(append([]string(nil), TwinSettings...),
		fmt.Sprintf("port = %d", opt.Port), "listen_addresses = ''",
		fmt.Sprintf("unix_socket_directories = '%s'", base)), "\n") + "\n"
	f, err := os.OpenFile(filepath.Join(tw.tmpl, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("bulkdata: %w", err)
	}
	if _, err := f.WriteString(tw.Conf); err != nil {
		f.Close()
		return nil, fmt.Errorf("bulkdata: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("bulkdata: %w", err)
	}
	if err := tw.start(ctx, tw.tmpl); err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := tw.psql(ctx, SQL(rows)+"SELECT 'heap_pages=' || pg_relation_size('t')/8192 AS heap_pages;\n")
	if serr := tw.stop(ctx, tw.tmpl); err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	tw.Load = out
	if m := heapPagesRE.FindStringSubmatch(out); m != nil {
		tw.HeapPages, _ = strconv.ParseInt(m[1], 10, 64)
	}
	opt.Logf("pg: %d rows loaded in %.1fs, %d heap pages", rows, time.Since(start).Seconds(), tw.HeapPages)
	return tw, nil
}

var (
	heapPagesRE = regexp.MustCompile(`heap_pages=([0-9]+)`)
	timingRE    = regexp.MustCompile(`(?m)^Time: ([0-9.]+) ms`)
)

// VacuumCold copies the template, starts the server on the copy, stops
// it, drops the OS page cache, starts it again and times VACUUM (VERBOSE)
// of the table with psql's \timing (the statement alone). It returns the
// seconds and psql's output; the copy is removed.
func (tw *Twin) VacuumCold(ctx context.Context, i int) (float64, string, error) {
	data := filepath.Join(tw.base, fmt.Sprintf("run%d", i))
	if _, err := runCmd(ctx, "cp", "-a", tw.tmpl, data); err != nil {
		return 0, "", err
	}
	s, out, err := tw.vacuumOnce(ctx, data)
	if rerr := os.RemoveAll(data); rerr != nil && err == nil {
		err = rerr
	}
	return s, out, err
}

func (tw *Twin) vacuumOnce(ctx context.Context, data string) (float64, string, error) {
	if err := DropCaches(); err != nil {
		return 0, "", err
	}
	if err := tw.start(ctx, data); err != nil {
		return 0, "", err
	}
	out, err := tw.psql(ctx, "\\timing on\nVACUUM (VERBOSE) t;\n")
	if serr := tw.stop(ctx, data); err == nil {
		err = serr
	}
	if err != nil {
		return 0, out, err
	}
	m := timingRE.FindStringSubmatch(out)
	if m == nil {
		return 0, out, fmt.Errorf("bulkdata: no timing in psql output:\n%s", out)
	}
	ms, err := strconv.ParseFloat(m[1], 64)
	return ms / 1000, out, err
}

// Close removes the cluster's directory (unless Keep).
func (tw *Twin) Close() {
	if !tw.opt.Keep {
		_ = os.RemoveAll(tw.base)
	}
}

// Dir is the cluster's directory (the template and the server log).
func (tw *Twin) Dir() string { return tw.base }

func (tw *Twin) start(ctx context.Context, data string) error {
	_, err := tw.pg(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(tw.base, "server.log"), "-w", "-t", "120", "start")
	return err
}

func (tw *Twin) stop(ctx context.Context, data string) error {
	_, err := tw.pg(ctx, "pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "300", "stop")
	return err
}

func (tw *Twin) psql(ctx context.Context, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "runuser", "-u", tw.opt.User, "--", filepath.Join(tw.opt.Bin, "psql"),
		"-X", "-v", "ON_ERROR_STOP=1", "-h", tw.base, "-p", strconv.Itoa(tw.opt.Port), "-U", "postgres", "-d", "postgres")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = tw.base
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("bulkdata: psql: %w\n%s", err, out.String())
	}
	return out.String(), nil
}

func (tw *Twin) pg(ctx context.Context, prog string, args ...string) (string, error) {
	return runCmd(ctx, "runuser", append([]string{"-u", tw.opt.User, "--", filepath.Join(tw.opt.Bin, prog)}, args...)...)
}

func runCmd(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("bulkdata: %s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
