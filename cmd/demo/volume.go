package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
)

// table is one bloated table of the demo volume.
type table struct {
	name             string
	rows, payload    int
	deleted, updated float64 // fractions; dead share = deleted + updated
	indexes          int
}

// demoTables: orders is the big one (~105 MiB of heap, 30 % dead), events the most bloated
// (55 % dead), customers small and 20 % dead (only the FULL policy touches it).
var demoTables = []table{
	{name: "orders", rows: 200_000, payload: 500, deleted: 0.30, indexes: 2},
	{name: "events", rows: 120_000, payload: 120, deleted: 0.35, updated: 0.20, indexes: 1},
	{name: "customers", rows: 40_000, payload: 200, deleted: 0.20, indexes: 2},
}

// makeVolume creates an engine data directory and bloats its tables with vacuum-runner.
func makeVolume(ctx context.Context, out io.Writer, runner, dir string) error {
	if err := runTool(ctx, out, runner, "init", "--data", dir); err != nil {
		return err
	}
	for _, t := range demoTables {
		err := runTool(ctx, out, runner, "bloat", "--data", dir, "--table", t.name,
			"--rows", strconv.Itoa(t.rows), "--payload-bytes", strconv.Itoa(t.payload),
			"--dead-fraction", strconv.FormatFloat(t.deleted, 'f', -1, 64),
			"--update-fraction", strconv.FormatFloat(t.updated, 'f', -1, 64),
			"--indexes", strconv.Itoa(t.indexes))
		if err != nil {
			return err
		}
	}
	return runTool(ctx, out, runner, "stats", "--data", dir)
}

// runTool runs vacuum-runner with args, its output indented under the demo's.
func runTool(ctx context.Context, out io.Writer, runner string, args ...string) error {
	cmd := exec.CommandContext(ctx, runner, args...)
	b, err := cmd.CombinedOutput()
	_, _ = fmt.Fprint(out, indent(string(b)))
	if err != nil {
		return fmt.Errorf("vacuum-runner %s: %w", args[0], err)
	}
	return nil
}
