package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// StatsOutput is `stats --json`.
type StatsOutput struct {
	Tables []TableStatsOutput `json:"tables"`
	// Quarantine is what the data directory's quarantine holds: relation
	// files no catalog entry names, moved aside (never deleted) by an Open
	// that found the directory inconsistent.
	Quarantine QuarantineOutput `json:"quarantine"`
}

// QuarantineOutput is the size of the data directory's quarantine.
type QuarantineOutput struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// TableStatsOutput is one table of `stats --json`. DeadTuples counts what a vacuum removes:
// tuple versions dead to every snapshot plus line pointers already pruned and waiting for
// their index entries to go.
type TableStatsOutput struct {
	Name       string             `json:"name"`
	Pages      int64              `json:"pages"`
	LiveTuples int64              `json:"liveTuples"`
	DeadTuples int64              `json:"deadTuples"`
	Indexes    []IndexStatsOutput `json:"indexes"`
}

// IndexStatsOutput is one index of `stats --json`.
type IndexStatsOutput struct {
	Name    string `json:"name"`
	Column  string `json:"column"`
	Pages   int64  `json:"pages"`
	Entries int64  `json:"entries"`
}

// CheckOutput is `check --json`.
type CheckOutput struct {
	OK       bool           `json:"ok"`
	Problems []CheckProblem `json:"problems"`
	// PurgedQuarantine is what `check --purge-quarantine` removed.
	PurgedQuarantine *QuarantineOutput `json:"purgedQuarantine,omitempty"`
}

// CheckProblem is one problem check found; Block is -1 when it is not about one block.
type CheckProblem struct {
	File    string `json:"file"`
	Block   int64  `json:"block"`
	Message string `json:"message"`
}

// dataFlags are the flags every command that opens a data directory has
// (and check's --purge-quarantine).
type dataFlags struct {
	data        string
	json        bool
	lockTimeout time.Duration
	purge       bool
	allowRecov  bool
}

func cmdInit(ctx context.Context, args []string, env Env) error {
	fs := cliflag.NewSet("init")
	data := fs.String("data", "", "data directory to create")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return usagef("--data is required")
	}
	if err := engine.Init(*data, engine.Options{Logf: engineLog(env.Stderr)}); err != nil {
		return err
	}
	_, err := fmt.Fprintf(env.Stdout, "initialized data directory %s\n", *data)
	return err
}

// parseDataFlags parses the flags of stats, check and upgrade.
func parseDataFlags(name string, args []string) (dataFlags, error) {
	var f dataFlags
	fs := cliflag.NewSet(name)
	fs.StringVar(&f.data, "data", "", "data directory")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.DurationVar(&f.lockTimeout, "lock-timeout", 0, "how long to wait for a busy data directory")
	fs.BoolVar(&f.allowRecov, "allow-crash-recovery", false,
		"replay the WAL of a data directory that was not shut down cleanly (else exit 7)")
	if name == "check" {
		fs.BoolVar(&f.purge, "purge-quarantine", false,
			"when the check is clean, remove the relation files Open moved into the quarantine directory")
	}
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if f.data == "" {
		return f, usagef("--data is required")
	}
	return f, nil
}

func cmdStats(ctx context.Context, args []string, env Env) (err error) {
	f, err := parseDataFlags("stats", args)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, f.data, recoveryGate(engine.Options{Logf: engineLog(env.Stderr)}, "", f.allowRecov), f.lockTimeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	st, err := db.Stats(ctx)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	out := statsOutput(st)
	qi, err := db.Quarantine()
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	out.Quarantine = QuarantineOutput{Files: qi.Files, Bytes: qi.Bytes}
	if f.json {
		return writeJSON(env.Stdout, out)
	}
	if qi.Files > 0 {
		if _, err := fmt.Fprintf(env.Stdout, "quarantine: %d files, %d bytes in %s (remove with check --purge-quarantine)\n",
			qi.Files, qi.Bytes, qi.Dir); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	p := &printer{w: tw}
	p.printf("table\tpages\tlive tuples\tdead tuples\tindex\tcolumn\tindex pages\tentries\t\n")
	for _, t := range out.Tables {
		p.printf("%s\t%d\t%d\t%d\t\t\t\t\t\n", t.Name, t.Pages, t.LiveTuples, t.DeadTuples)
		for _, ix := range t.Indexes {
			p.printf("\t\t\t\t%s\t%s\t%d\t%d\t\n", ix.Name, ix.Column, ix.Pages, ix.Entries)
		}
	}
	if p.err != nil {
		return p.err
	}
	return tw.Flush()
}

// statsOutput converts the engine's statistics to the JSON contract.
func statsOutput(st []engine.TableStats) StatsOutput {
	out := StatsOutput{Tables: []TableStatsOutput{}}
	for _, t := range st {
		ts := TableStatsOutput{Name: t.Name, Pages: t.Pages, LiveTuples: t.LiveTuples,
			DeadTuples: t.DeadTuples + t.DeadLinePointers, Indexes: []IndexStatsOutput{}}
		for _, ix := range t.Indexes {
			ts.Indexes = append(ts.Indexes, IndexStatsOutput{Name: ix.Name, Column: ix.Column, Pages: ix.Pages, Entries: ix.Entries})
		}
		out.Tables = append(out.Tables, ts)
	}
	return out
}

func cmdCheck(ctx context.Context, args []string, env Env) (err error) {
	f, err := parseDataFlags("check", args)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, f.data, recoveryGate(engine.Options{Logf: engineLog(env.Stderr)}, "", f.allowRecov), f.lockTimeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	rep, err := db.Check(ctx)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	out := CheckOutput{OK: rep.OK(), Problems: []CheckProblem{}}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, CheckProblem{File: p.File, Block: p.Block, Message: p.Message})
	}
	// The quarantine may hold the only copy of a damaged table's files:
	// it is purged only from a directory that checks clean.
	var purged engine.QuarantineInfo
	if f.purge && out.OK {
		if purged, err = db.PurgeQuarantine(); err != nil {
			return fmt.Errorf("check: %w", err)
		}
		out.PurgedQuarantine = &QuarantineOutput{Files: purged.Files, Bytes: purged.Bytes}
	}
	if f.json {
		if err := writeJSON(env.Stdout, out); err != nil {
			return err
		}
	} else {
		p := &printer{w: env.Stdout}
		if out.OK {
			p.printf("ok: %d relations, %d pages verified\n", rep.Relations, rep.Pages)
		}
		if out.PurgedQuarantine != nil {
			p.printf("purged the quarantine: %d files, %d bytes\n", purged.Files, purged.Bytes)
		} else if f.purge {
			p.printf("quarantine kept: check found problems\n")
		}
		for _, pr := range out.Problems {
			p.printf("%s block %d: %s\n", pr.File, pr.Block, pr.Message)
		}
		if p.err != nil {
			return p.err
		}
	}
	if !out.OK {
		return &CorruptionError{Problems: rep.Problems}
	}
	return nil
}

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
