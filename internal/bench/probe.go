package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// Probe is what the run measures of the machine before the experiments,
// so that the report compares its figures with this machine's, not with
// numbers from elsewhere.
type Probe struct {
	// Direct is true when the work directory's file system accepted
	// O_DIRECT; otherwise the read rates are page-cache copies.
	Direct bool
	// Read8KMBps and Read128KMBps are one reader's sequential read rates
	// of a file written and fsynced first, in 8 KiB and 128 KiB requests
	// (the vacuum reads runs of up to 128 KiB).
	Read8KMBps, Read128KMBps float64
	// DSyncWriteMs is the median latency of an 8 KiB O_DSYNC write: what
	// one WAL flush costs at least.
	DSyncWriteMs float64
	// SleepFloorMs is the median duration of time.Sleep(50µs);
	// Sleep1msMs that of time.Sleep(1ms).
	SleepFloorMs, Sleep1msMs float64
	// Burst is the throttle's default burst (throttle.DefaultBurst), a
	// setting of the code, not a measurement.
	Burst time.Duration
}

// probeSizes are the probe's amounts of work.
type probeSizes struct {
	fileBytes   int64
	dsyncWrites int
	sleeps      int
}

func probeSizesOf(quick bool) probeSizes {
	if quick {
		return probeSizes{fileBytes: 8 << 20, dsyncWrites: 40, sleeps: 40}
	}
	return probeSizes{fileBytes: 64 << 20, dsyncWrites: 400, sleeps: 200}
}

// RunProbe measures the machine in dir (a file is written there and
// removed).
func RunProbe(ctx context.Context, dir string, quick bool) (Probe, error) {
	ps := probeSizesOf(quick)
	pr := Probe{Burst: throttle.DefaultBurst}
	p := filepath.Join(dir, "probe.dat")
	defer os.Remove(p)
	if err := writeProbeFile(p, ps.fileBytes); err != nil {
		return pr, err
	}
	var err error
	if pr.Read8KMBps, pr.Direct, err = readRate(p, 8<<10); err != nil {
		return pr, err
	}
	if pr.Read128KMBps, _, err = readRate(p, 128<<10); err != nil {
		return pr, err
	}
	if pr.DSyncWriteMs, err = dsyncLatency(p, ps.dsyncWrites); err != nil {
		return pr, err
	}
	pr.SleepFloorMs = sleepMedian(ctx, 50*time.Microsecond, ps.sleeps)
	pr.Sleep1msMs = sleepMedian(ctx, time.Millisecond, ps.sleeps)
	return pr, ctx.Err()
}

func writeProbeFile(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return fmt.Errorf("probe: write %s: %w", p, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("probe: fsync %s: %w", p, err)
	}
	return f.Close()
}

// alignedBuf returns n bytes aligned for O_DIRECT.
func alignedBuf(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := (align - int(uintptr(unsafe.Pointer(&b[0]))%align)) % align
	return b[off : off+n]
}

// readRate reads file p sequentially in requests of size bytes, with
// O_DIRECT when the file system accepts it, and returns MB/s.
func readRate(p string, size int) (float64, bool, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	direct := err == nil
	if !direct {
		if fd, err = unix.Open(p, unix.O_RDONLY, 0); err != nil {
			return 0, false, fmt.Errorf("probe: open %s: %w", p, err)
		}
	}
	defer unix.Close(fd)
	buf := alignedBuf(size)
	var total int64
	start := time.Now()
	for {
		n, err := unix.Pread(fd, buf, total)
		if err != nil {
			return 0, direct, fmt.Errorf("probe: read %s at %d: %w", p, total, err)
		}
		if n <= 0 {
			break
		}
		total += int64(n)
	}
	return float64(total) / 1e6 / time.Since(start).Seconds(), direct, nil
}

// dsyncLatency writes 8 KiB with O_DSYNC n times and returns the median
// latency in ms.
func dsyncLatency(p string, n int) (float64, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|unix.O_DSYNC, 0)
	if err != nil {
		return 0, fmt.Errorf("probe: open %s O_DSYNC: %w", p, err)
	}
	defer f.Close()
	buf := make([]byte, 8<<10)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%128)*int64(len(buf))); err != nil {
			return 0, fmt.Errorf("probe: O_DSYNC write %s: %w", p, err)
		}
		lat = append(lat, time.Since(t0))
	}
	return ms(median(lat)), nil
}

// sleepMedian returns the median duration of n time.Sleep(d) in ms.
func sleepMedian(ctx context.Context, d time.Duration, n int) float64 {
	lat := make([]time.Duration, 0, n)
	for range n {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		time.Sleep(d)
		lat = append(lat, time.Since(t0))
	}
	return ms(median(lat))
}

func median(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[len(s)/2]
}

// probeTable is the probe's CSV: one row per figure.
func probeTable(pr Probe) (*Table, error) {
	t := NewTable("exp0_machine_probe", 1, "figure", "value")
	direct := 0.0
	if pr.Direct {
		direct = 1
	}
	for _, row := range []struct {
		name string
		v    float64
	}{
		{"o_direct", direct},
		{"read_8k_mb_per_s", pr.Read8KMBps},
		{"read_128k_mb_per_s", pr.Read128KMBps},
		{"dsync_write_8k_ms", pr.DSyncWriteMs},
		{"sleep_50us_ms", pr.SleepFloorMs},
		{"sleep_1ms_ms", pr.Sleep1msMs},
		{"throttle_burst_ms", ms(pr.Burst)},
	} {
		if err := t.Add([]string{row.name}, row.v); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// runProbe is section 0: the machine probe, whose figures later rules
// compare with.
func runProbe(ctx context.Context, r *runner) (*Section, error) {
	pr, err := RunProbe(ctx, r.work, r.cfg.Quick)
	if err != nil {
		return nil, err
	}
	r.probe = pr
	t, err := probeTable(pr)
	if err != nil {
		return nil, err
	}
	ps := probeSizesOf(r.cfg.Quick)
	sec := &Section{
		Title:  probeText.title,
		Claim:  probeText.claim,
		Tables: []*Table{t},
		Setup: []string{
			sentence("a %s file in the work directory, written and fsynced, then read sequentially by one reader "+
				"in 8 KiB and in 128 KiB requests, with O_DIRECT when the file system accepts it", mib(ps.fileBytes)),
			sentence("%d 8 KiB writes with O_DSYNC over its first MiB; the median latency", ps.dsyncWrites),
			sentence("%d time.Sleep(50µs) and %d time.Sleep(1ms); the median durations", ps.sleeps, ps.sleeps),
			"throttle_burst_ms is throttle.DefaultBurst, the code's default burst: a setting, not a measurement",
		},
		Caveats: probeText.caveats,
	}
	if !pr.Direct {
		sec.Caveats = append(sec.Caveats, probeText.buffered)
	}
	return sec, nil
}

func probeHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp0_machine_probe"
	v := func(name string) float64 { return c.num(t, c.row(t, name), "value") }
	how := "direct"
	if v("o_direct") == 0 {
		how = "buffered (O_DIRECT refused)"
	}
	s := sentence("One reader: %.1f MB/s in 8 KiB and %.1f MB/s in 128 KiB %s reads; "+
		"an 8 KiB O_DSYNC write: %.3f ms; time.Sleep(50µs) sleeps %.3f ms and time.Sleep(1ms) %.3f ms; "+
		"the throttle's default burst is %.0f ms.",
		v("read_8k_mb_per_s"), v("read_128k_mb_per_s"), how, v("dsync_write_8k_ms"),
		v("sleep_50us_ms"), v("sleep_1ms_ms"), v("throttle_burst_ms"))
	return s, c.err
}

var probeText = struct {
	title, claim, buffered string
	caveats                []string
}{
	title: "Machine probe",
	claim: "(none: these are the figures of this machine that the later sections compare with, " +
		"measured at the start of this run)",
	buffered: "The file system refused O_DIRECT, so the read rates are page-cache copies, not the disk.",
	caveats: []string{
		"One reader, one request at a time: the disk may serve more to several readers or deeper queues.",
		"The probe runs once, on a machine shared with other work; its figures vary between runs as the load does.",
	},
}

// LimitWork is the I/O one vacuum cannot avoid, which the machine-limit
// probe does and nothing else: read the table's relation files once,
// cold; write its WAL volume and fsync it; write the pages it wrote and
// fsync them.
type LimitWork struct {
	Dir        string // a data directory's relation files (its base/ directory): read whole
	WALBytes   int64  // written sequentially over a preallocated file, then fsynced
	PageWrites int64  // 8 KiB pages written over a preallocated file, then fsynced
	Direct     bool   // O_DIRECT for every read and write (buffered when the file system refuses it)
}

// Limit is what the machine-limit probe measured.
type Limit struct {
	ReadBytes      int64
	Read, WAL, Pgs time.Duration // each step; Total is their sum
	Total          time.Duration
	Cold           bool // the OS page cache was dropped before the reads
	Direct         bool // every file was opened with O_DIRECT
}

// limitRequest is the probe's request size: the vacuum's largest run of
// blocks (buffer.ReadRun's 16 blocks).
const limitRequest = 128 << 10

// MachineLimit does w's work in work (two scratch files there, removed)
// and times it: every file under w.Dir read sequentially in 128 KiB
// requests after the OS page cache is dropped (as root; else warm, and
// Cold says so), then w.WALBytes written and fsynced, then w.PageWrites
// pages written and fsynced. The steps run one after the other, one
// request at a time, as the vacuum issues them (it overlaps none of its
// reads with its writes).
func MachineLimit(ctx context.Context, work string, w LimitWork) (Limit, error) {
	lim := Limit{Direct: w.Direct}
	walFile, pageFile := filepath.Join(work, "limit-wal.dat"), filepath.Join(work, "limit-pages.dat")
	defer os.Remove(walFile)
	defer os.Remove(pageFile)
	// Preallocate both (the engine's WAL segments and relation files exist
	// before the vacuum writes them): not timed.
	for _, f := range []struct {
		p string
		n int64
	}{{walFile, w.WALBytes}, {pageFile, w.PageWrites * 8192}} {
		if err := writeProbeFile(f.p, roundUp(f.n, 1<<20)); err != nil {
			return lim, err
		}
	}
	var files []string
	err := filepath.WalkDir(w.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return lim, fmt.Errorf("probe: %w", err)
	}
	lim.Cold = dropCaches() == nil
	buf := alignedBuf(limitRequest)
	start := time.Now()
	for _, p := range files {
		if err := ctx.Err(); err != nil {
			return lim, err
		}
		n, direct, err := readWhole(p, buf, w.Direct)
		if err != nil {
			return lim, err
		}
		lim.ReadBytes += n
		lim.Direct = lim.Direct && direct
	}
	lim.Read = time.Since(start)
	t := time.Now()
	direct, err := overwrite(walFile, buf, w.WALBytes, w.Direct)
	if err != nil {
		return lim, err
	}
	lim.Direct = lim.Direct && direct
	lim.WAL = time.Since(t)
	t = time.Now()
	if direct, err = overwrite(pageFile, buf, w.PageWrites*8192, w.Direct); err != nil {
		return lim, err
	}
	lim.Direct = lim.Direct && direct
	lim.Pgs = time.Since(t)
	lim.Total = lim.Read + lim.WAL + lim.Pgs
	return lim, ctx.Err()
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// dropCaches writes dirty pages back and drops the OS page cache (root only).
func dropCaches() error {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
}

// openProbe opens p with flags, adding O_DIRECT when direct asks for it
// and the file system accepts it; it reports whether O_DIRECT is on.
func openProbe(p string, flags int, direct bool) (int, bool, error) {
	if direct {
		if fd, err := unix.Open(p, flags|unix.O_DIRECT, 0); err == nil {
			return fd, true, nil
		}
	}
	fd, err := unix.Open(p, flags, 0)
	if err != nil {
		return -1, false, fmt.Errorf("probe: open %s: %w", p, err)
	}
	return fd, false, nil
}

// readWhole reads file p sequentially in len(buf) requests.
func readWhole(p string, buf []byte, direct bool) (int64, bool, error) {
	fd, direct, err := openProbe(p, unix.O_RDONLY, direct)
	if err != nil {
		return 0, false, err
	}
	defer unix.Close(fd)
	var total int64
	for {
		n, err := unix.Pread(fd, buf, total)
		if err != nil {
			return total, direct, fmt.Errorf("probe: read %s at %d: %w", p, total, err)
		}
		if n <= 0 {
			return total, direct, nil
		}
		total += int64(n)
		if n < len(buf) {
			return total, direct, nil
		}
	}
}

// overwrite writes n bytes (rounded up to whole 8 KiB pages) from the
// start of the preallocated file p in len(buf) requests, then fsyncs it.
func overwrite(p string, buf []byte, n int64, direct bool) (bool, error) {
	fd, direct, err := openProbe(p, unix.O_WRONLY, direct)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	n = roundUp(n, 8192)
	for off := int64(0); off < n; {
		req := buf[:min(int64(len(buf)), n-off)]
		m, err := unix.Pwrite(fd, req, off)
		if err != nil {
			return direct, fmt.Errorf("probe: write %s at %d: %w", p, off, err)
		}
		off += int64(m)
	}
	if err := unix.Fsync(fd); err != nil {
		return direct, fmt.Errorf("probe: fsync %s: %w", p, err)
	}
	return direct, nil
}
