package online

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Verbose is what a table's VACUUM VERBOSE notices say, parsed from PostgreSQL's messages
// (lazy: "finished vacuuming ..." and "scanned index ..."; FULL: "found N removable, M
// nonremovable row versions in P pages"). A figure the notices do not carry stays 0; Found
// says whether the summary line was seen at all.
type Verbose struct {
	Found                                      bool
	IndexScans                                 int64
	PagesRemoved, PagesRemaining, PagesScanned int64
	TuplesRemoved, TuplesRemaining             int64
	Hits, Misses, Dirtied                      int64
	WALRecords, WALFullPageImages, WALBytes    int64
	// Slept is the time the table's VACUUM slept for the throttle, from the engine server's
	// "system usage: elapsed E s, slept S s" line; SleptReported says the line was there.
	// PostgreSQL's system usage line has no such figure: it counts no time slept.
	Slept         time.Duration
	SleptReported bool
	// Indexes are the indexes named by the notices, in order, with the row versions each
	// scan removed (summed) and their pages.
	Indexes []VerboseIndex
}

// VerboseIndex is one index in VACUUM VERBOSE's notices.
type VerboseIndex struct {
	Name           string
	Pages          int64
	EntriesRemoved int64
}

var (
	reIndexScans  = regexp.MustCompile(`index scans: (\d+)`)
	rePages       = regexp.MustCompile(`pages: (\d+) removed, (\d+) remain, (\d+) scanned`)
	reTuples      = regexp.MustCompile(`tuples: (\d+) removed, (\d+) remain`)
	reBuffers     = regexp.MustCompile(`buffer usage: (\d+) hits, (\d+) misses, (\d+) dirtied`)
	reWAL         = regexp.MustCompile(`WAL usage: (\d+) records, (\d+) full page images, (\d+) bytes`)
	reIndexPages  = regexp.MustCompile(`index "((?:[^"]|"")*)": pages: (\d+) in total`)
	reIndexScan   = regexp.MustCompile(`scanned index "((?:[^"]|"")*)" to remove (\d+) row versions`)
	reIndexNeeded = regexp.MustCompile(`had (\d+) dead item identifiers removed`)
	reSlept       = regexp.MustCompile(`system usage: elapsed [0-9.]+ s, slept ([0-9]+(?:\.[0-9]+)?) s`)
	reFullSummary = regexp.MustCompile(`found (\d+) removable, (\d+) nonremovable row versions in (\d+) pages`)
)

// ParseVerbose reads the notices (messages with their detail lines) of one table's VACUUM
// VERBOSE. It never fails: text it does not recognise is ignored. The first summary is the
// table's; a later one (its TOAST table's) is not counted.
func ParseVerbose(notices []string) Verbose {
	var v Verbose
	index := map[string]int{}
	ix := func(name string) *VerboseIndex {
		name = strings.ReplaceAll(name, `""`, `"`)
		i, ok := index[name]
		if !ok {
			i = len(v.Indexes)
			index[name] = i
			v.Indexes = append(v.Indexes, VerboseIndex{Name: name})
		}
		return &v.Indexes[i]
	}
	for _, n := range notices {
		// The table's own summary comes first; its TOAST table's follows and is not it.
		if strings.Contains(n, "finished vacuuming") && !v.Found {
			v.Found = true
			num(reIndexScans, n, &v.IndexScans)
			num(rePages, n, &v.PagesRemoved, &v.PagesRemaining, &v.PagesScanned)
			num(reTuples, n, &v.TuplesRemoved, &v.TuplesRemaining)
			num(reBuffers, n, &v.Hits, &v.Misses, &v.Dirtied)
			num(reWAL, n, &v.WALRecords, &v.WALFullPageImages, &v.WALBytes)
			if m := reSlept.FindStringSubmatch(n); m != nil {
				if s, err := strconv.ParseFloat(m[1], 64); err == nil {
					v.Slept, v.SleptReported = time.Duration(s*float64(time.Second)), true
				}
			}
			var removed int64
			if v.IndexScans > 0 {
				num(reIndexNeeded, n, &removed)
			}
			for _, m := range reIndexPages.FindAllStringSubmatch(n, -1) {
				e := ix(m[1])
				e.Pages = atoi(m[2])
				// PostgreSQL 15 logs one count for the table: each index scan removed
				// the entries of those dead item identifiers.
				e.EntriesRemoved = removed
			}
		}
		for _, m := range reIndexScan.FindAllStringSubmatch(n, -1) {
			e := ix(m[1])
			e.EntriesRemoved += atoi(m[2])
		}
		if m := reFullSummary.FindStringSubmatch(n); m != nil && !v.Found {
			v.Found = true
			v.TuplesRemoved, v.TuplesRemaining, v.PagesScanned = atoi(m[1]), atoi(m[2]), atoi(m[3])
		}
	}
	return v
}

// num stores re's submatches of s, in order, into dst.
func num(re *regexp.Regexp, s string, dst ...*int64) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return
	}
	for i, d := range dst {
		*d = atoi(m[i+1])
	}
}

// atoi reads a run of digits; one too long for int64 reads as 0 rather than a wrong figure.
func atoi(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return v
}
