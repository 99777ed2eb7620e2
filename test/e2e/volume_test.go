package e2e

import (
	"encoding/json"
	"path/filepath"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/vacuumops/vacuum-operator/internal/devcluster"
	"github.com/vacuumops/vacuum-operator/test/e2eutil"
)

// bloatTable is one table `vacuum-runner bloat` makes.
type bloatTable struct {
	name          string
	rows, payload int
	indexes       int // B-tree indexes (0: bloat's default, one)
	deleted       float64
	updated       float64
}

// tableStats is one table of `vacuum-runner stats --json`.
type tableStats struct {
	Name       string `json:"name"`
	Pages      int64  `json:"pages"`
	LiveTuples int64  `json:"liveTuples"`
	DeadTuples int64  `json:"deadTuples"`
}

// makeVolume makes an engine data directory with the given bloated tables, a PV on it and
// claim ns/claim bound to it; it returns the directory and the dead tuples of each table.
func makeVolume(ns, claim string, tables ...bloatTable) (string, map[string]int64) {
	GinkgoHelper()
	dir := filepath.Join(GinkgoT().TempDir(), claim)
	runTool("init", "--data", dir)
	for _, t := range tables {
		runTool("bloat", "--data", dir, "--table", t.name, "--rows", strconv.Itoa(t.rows),
			"--payload-bytes", strconv.Itoa(t.payload),
			"--dead-fraction", strconv.FormatFloat(t.deleted, 'f', -1, 64),
			"--update-fraction", strconv.FormatFloat(t.updated, 'f', -1, 64),
			"--indexes", strconv.Itoa(max(t.indexes, 1)))
	}
	dead := map[string]int64{}
	for _, s := range stats(dir) {
		dead[s.Name] = s.DeadTuples
	}
	Expect(devcluster.CreateVolume(suiteCtx, cluster.Client, ns, claim, dir)).To(Succeed())
	return dir, dead
}

// runTool runs vacuum-runner and returns its stdout; it fails the spec on a non-zero exit.
func runTool(args ...string) []byte {
	GinkgoHelper()
	return e2eutil.Runner{Ctx: suiteCtx, Bin: runner}.Run(args...)
}

// stats is `vacuum-runner stats --json` of a data directory.
func stats(dir string) []tableStats {
	GinkgoHelper()
	var s struct {
		Tables []tableStats `json:"tables"`
	}
	Expect(json.Unmarshal(runTool("stats", "--data", dir, "--json"), &s)).To(Succeed())
	return s.Tables
}

// expectCheckClean runs `vacuum-runner check --json` and expects no problems.
func expectCheckClean(dir string) {
	GinkgoHelper()
	e2eutil.Runner{Ctx: suiteCtx, Bin: runner}.ExpectCheckClean(dir)
}

// sum adds the dead tuples of the named tables.
func sum(dead map[string]int64, tables ...string) int64 {
	var n int64
	for _, t := range tables {
		n += dead[t]
	}
	return n
}
