"""Reads one hack/fgprobe/run.sh probe directory and prints what the load saw (see run.sh)."""
import glob
import os
import sys

out = sys.argv[1]
start = float(open(os.path.join(out, "vacuum.start")).read())
end = float(open(os.path.join(out, "vacuum.end")).read())
print(f"VACUUM (or its stand-in) judged over {end - start:.2f} s")

# pgbench -l with -R: client, transaction, latency us (from the scheduled start), script,
# epoch s, us, schedule lag us.
rows = []
for f in glob.glob(os.path.join(out, "tx.*")):
    for line in open(f):
        p = line.split()
        rows.append((int(p[4]) + int(p[5]) / 1e6, int(p[2]) / 1e3, int(p[6]) / 1e3 if len(p) > 6 else 0.0))
rows.sort()


def pct(xs, q):
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1))] if xs else float("nan")


first = rows[0][0] if rows else 0
parts = {
    "alone": [r for r in rows if first + 1 < r[0] < start - 0.5],
    "during": [r for r in rows if start <= r[0] <= end],
    "after": [r for r in rows if r[0] > end + 0.5],
}
for name, s in parts.items():
    lat = [r[1] for r in s]
    print(f"{name}: {len(s)} transactions, p50 {pct(lat, 0.5):.3f} ms, p99 {pct(lat, 0.99):.3f} ms, "
          f"schedule lag p99 {pct([r[2] for r in s], 0.99):.3f} ms")

during = parts["during"]
by_second = {}
for r in during:
    by_second.setdefault(int(r[0] - start), []).append(r[1])
print("each second of the VACUUM (s from its start: p99 ms / transactions / max ms):")
print(" ".join(f"{k}:{pct(v, 0.99):.2f}/{len(v)}/{max(v):.1f}" for k, v in sorted(by_second.items())))
slow = sorted(sorted(during, key=lambda r: -r[1])[:max(1, len(during) // 100)])
print("the slowest 1 % (s from the VACUUM's start: latency ms):")
print(" ".join(f"{r[0] - start:.2f}:{r[1]:.1f}" for r in slow))

times_path = os.path.join(out, "poll.times")
if os.path.exists(times_path):
    times = [float(x) for x in open(times_path)]
    lines = open(os.path.join(out, "poll.out")).read().split("\n")
    server = [float(lines[i + 2].split("|")[3]) / 1e3 for i, l in enumerate(lines) if "window_seconds" in l]
    print("10-second windows ending at a poll (s from the VACUUM's start: server's p99 / pgbench's p99, ms):")
    cells = []
    for t, v in list(zip(times, server))[::8]:
        w = [r[1] for r in rows if t - 10 <= r[0] <= t]
        if len(w) > 100:
            cells.append(f"{t - start:.0f}:{v:.2f}/{pct(w, 0.99):.2f}")
    print(" ".join(cells))
