package soak

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// ErrDiverged is returned (wrapped) when the soak found a problem (listed in
// Figures.Problems).
var ErrDiverged = errors.New("soak found a problem")

// Config configures Run.
type Config struct {
	// Data is the data directory (created with the table if it does not
	// exist; an existing one is resumed with its ledger).
	Data string
	// Ledger is the ledger file, which must be outside Data.
	Ledger string
	// Seed makes the driver's choices reproducible (children get seeds
	// derived from it; timing still varies).
	Seed uint64
	// Kills stops the soak after this many crashes (0 = no limit).
	Kills int
	// Duration stops the soak after this long (0 = no limit). At least one
	// of Kills and Duration must be set.
	Duration time.Duration
	// Rows is the table size the writer steers towards (0 = 1000).
	Rows int
	// MaxRun is the longest a SIGKILL child runs after "ready" (0 = 600ms).
	MaxRun time.Duration
	// PowerLossShare is the share of crashes that are simulated power
	// losses (0 = 0.5; negative = none).
	PowerLossShare float64
	// PowerLossMaxOps bounds the mutating file operation at which a
	// power-loss child is cut (drawn uniformly from 1..PowerLossMaxOps;
	// 0 = 4000, about 1-3 s of work). Lowered automatically when children
	// do not reach it in time.
	PowerLossMaxOps int
	// RecoveryCrashShare is the share of crashes followed by a second crash
	// inside the crash recovery of a recovery-only child (0 = 0.1;
	// negative = none).
	RecoveryCrashShare float64
	// Command builds the command that runs ChildMain with args.
	Command func(args []string) *exec.Cmd
	// Logf receives one line per crash (nil = discard).
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Rows <= 0 {
		c.Rows = 1000
	}
	if c.MaxRun <= 0 {
		c.MaxRun = 600 * time.Millisecond
	}
	if c.PowerLossShare == 0 {
		c.PowerLossShare = 0.5
	}
	if c.PowerLossMaxOps <= 0 {
		c.PowerLossMaxOps = 4000
	}
	if c.RecoveryCrashShare == 0 {
		c.RecoveryCrashShare = 0.1
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

type driver struct {
	cfg    Config
	rng    *rand.Rand
	ledger *Ledger
	fig    *Figures
	plMax  int // power-loss cut-off operations are drawn from [1, plMax]
	nchild int
}

// Run runs the soak until cfg.Kills crashes, cfg.Duration or ctx ends,
// and returns its figures. The error is ErrDiverged (wrapped, with the
// first problem) when a verification failed, or a failure of the driver
// itself; the data directory and ledger are then left as they were.
func Run(ctx context.Context, cfg Config) (*Figures, error) {
	cfg = cfg.withDefaults()
	if cfg.Kills <= 0 && cfg.Duration <= 0 {
		return nil, errors.New("soak: set Kills or Duration")
	}
	if cfg.Command == nil {
		return nil, errors.New("soak: no child Command")
	}
	if rel, err := filepath.Rel(cfg.Data, cfg.Ledger); err == nil && !strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("soak: ledger %s must be outside the data directory %s", cfg.Ledger, cfg.Data)
	}
	d := &driver{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xd21)), fig: &Figures{}, plMax: cfg.PowerLossMaxOps}
	if err := d.prepare(); err != nil {
		return nil, err
	}
	start := time.Now()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	var err error
	for ctx.Err() == nil && (cfg.Kills <= 0 || d.fig.Crashes < cfg.Kills) {
		if err = d.iteration(); err != nil {
			break
		}
	}
	d.fig.Elapsed = time.Since(start)
	d.fig.Commits, d.fig.Ops = d.ledger.Commits, d.ledger.Ops
	d.fig.InflightFound = d.ledger.Resolved
	d.fig.LedgerTorn = d.ledger.TornTails
	d.fig.FinalRows = len(d.ledger.State)
	if err == nil && len(d.fig.Problems) > 0 {
		err = fmt.Errorf("%w: %s", ErrDiverged, d.fig.Problems[0])
	}
	return d.fig, err
}

// prepare creates the data directory and table, or resumes them.
func (d *driver) prepare() error {
	_, err := os.Stat(filepath.Join(d.cfg.Data, wal.ControlFileName))
	fresh := errors.Is(err, fs.ErrNotExist)
	if fresh {
		if _, err := os.Stat(d.cfg.Ledger); err == nil {
			return fmt.Errorf("soak: ledger %s exists but data directory %s does not: remove the ledger", d.cfg.Ledger, d.cfg.Data)
		}
		if err := createTable(d.cfg.Data); err != nil {
			return err
		}
	}
	if d.ledger, err = OpenLedger(d.cfg.Ledger); err != nil {
		return err
	}
	if !fresh && d.ledger.Commits == 0 && len(d.ledger.State) == 0 {
		d.cfg.Logf("resuming %s with an empty ledger", d.cfg.Data)
	}
	return nil
}

func createTable(dir string) error {
	opts := EngineOptions()
	if err := engine.Init(dir, opts); err != nil {
		return err
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		return err
	}
	err = db.CreateTable(Table, Columns)
	if err == nil {
		err = db.CreateIndex(IDIndex, Table, "id")
	}
	if err == nil {
		err = db.CreateIndex(GrpIndex, Table, "grp")
	}
	return errors.Join(err, db.Close())
}

// iteration runs one child to its crash (maybe a recovery-only child
// after it), then verifies.
func (d *driver) iteration() error {
	pl := d.rng.Float64() < d.cfg.PowerLossShare
	if err := d.crash(pl, false); err != nil {
		return err
	}
	if len(d.fig.Problems) == 0 && d.rng.Float64() < d.cfg.RecoveryCrashShare {
		if err := d.crash(d.rng.IntN(2) == 0, true); err != nil {
			return err
		}
	}
	if len(d.fig.Problems) > 0 {
		return nil
	}
	return d.verify()
}

// proc is a running child.
type proc struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	done   chan struct{}
	stderr bytes.Buffer
}

func (d *driver) start(a ChildArgs) (*proc, error) {
	p := &proc{cmd: d.cfg.Command(a.Args()), ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(p.ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill SIGKILLs p and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// crash runs one child until it crashes.
func (d *driver) crash(powerLoss, recoveryOnly bool) error {
	d.nchild++
	a := ChildArgs{Data: d.cfg.Data, Ledger: d.cfg.Ledger, Name: fmt.Sprintf("c%d", d.nchild),
		Seed: d.rng.Uint64(), Rows: d.cfg.Rows, RecoveryOnly: recoveryOnly}
	if powerLoss {
		a.PowerLossAfter = 1 + d.rng.IntN(d.plMax)
		if recoveryOnly || d.rng.IntN(8) == 0 {
			a.PowerLossAfter = 1 + d.rng.IntN(40) // inside Open: recovery, first checkpoint
		}
	}
	p, err := d.start(a)
	if err != nil {
		return err
	}
	kind := "SIGKILL"
	if powerLoss {
		kind = "power loss"
		select {
		case <-p.done:
		case <-time.After(5*time.Second + 10*d.cfg.MaxRun):
			// Not reached (a recovery-only child never writes after Open).
			p.kill()
			kind = "SIGKILL"
			if !recoveryOnly {
				d.fig.PowerLossNotReached++
				d.plMax = max(50, d.plMax*2/3)
			}
		}
	} else if recoveryOnly {
		// Kill it inside Open (process start plus crash recovery).
		select {
		case <-p.done:
		case <-time.After(time.Duration(d.rng.Int64N(int64(80 * time.Millisecond)))):
			p.kill()
		}
	} else {
		select {
		case <-p.ready:
		case <-p.done:
		case <-time.After(60 * time.Second):
			p.kill()
			d.problem("child %s: not ready after 60s", a.Name)
			return nil
		}
		select {
		case <-p.done:
		case <-time.After(time.Duration(d.rng.Int64N(int64(d.cfg.MaxRun)))):
			p.kill()
		}
	}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case kind == "SIGKILL" && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		d.fig.SIGKILLs++
	case kind == "power loss" && ws.Exited() && ws.ExitStatus() == ExitPoweredOff:
		d.fig.PowerLoss++
	default:
		d.problem("child %s (%s) ended by itself: %v: %s", a.Name, kind, p.cmd.ProcessState, strings.TrimSpace(p.stderr.String()))
		return nil
	}
	d.fig.Crashes++
	return d.crashEvents(a.Name, kind, recoveryOnly)
}

// crashEvents reads the child's events from the ledger: what was running
// when it crashed, what it completed.
func (d *driver) crashEvents(name, kind string, recoveryOnly bool) error {
	if _, err := d.ledger.Read(); err != nil {
		return err
	}
	if err := d.ledger.DropTornTail(); err != nil {
		return err
	}
	running := map[string]bool{}
	ready := false
	for _, ev := range d.ledger.Events {
		f := strings.Fields(ev)
		if len(f) < 2 || f[0] != name {
			continue
		}
		switch {
		case f[1] == "ready":
			ready = true
		case f[1] == "begin" && len(f) == 3:
			running[f[2]] = true
		case f[1] == "end" && len(f) == 3:
			running[f[2]] = false
			switch f[2] {
			case "lazy":
				d.fig.LazyDone++
			case "full":
				d.fig.FullDone++
			case "checkpoint":
				d.fig.CheckpointDone++
			}
		}
	}
	if !ready {
		d.fig.BeforeReady++
	}
	if !recoveryOnly {
		d.fig.WriterCrashes++
	}
	if recoveryOnly {
		d.fig.RecoveryOnly++
		if !ready { // killed before Open (recovery and its checkpoint) returned
			d.fig.RecoveryCrashes++
		}
	}
	if running["lazy"] {
		d.fig.DuringLazy++
	}
	if running["full"] {
		d.fig.DuringFull++
	}
	if running["checkpoint"] {
		d.fig.DuringCheckpoint++
	}
	var during []string
	for k, v := range running {
		if v {
			during = append(during, k)
		}
	}
	if !ready {
		during = append(during, "open")
	}
	what := ""
	if recoveryOnly {
		what = " (recovery-only)"
	}
	d.cfg.Logf("crash %d: %s %s%s during %v; %d committed transactions, %d rows",
		d.fig.Crashes, name, kind, what, during, d.ledger.Commits, len(d.ledger.State))
	return nil
}

func (d *driver) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.fig.Problems = append(d.fig.Problems, fmt.Sprintf("after crash %d: %s", d.fig.Crashes, msg))
	d.cfg.Logf("PROBLEM: %s", msg)
}
