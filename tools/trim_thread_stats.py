#!/usr/bin/python3
"""Per-thread allocator figures of a trim, from a server run with
--trim_thread_stats (docs/TRIM.md, "Goal (a): ... out of reach, and why").

    tools/trim_thread_stats.py RUN_DIR/events.jsonl   # the scenario's phase trim
    tools/trim_thread_stats.py TRIM.json              # `rsslab_ctl --json trim` output
    tools/trim_thread_stats.py FILE --workers         # also one line per worker

mimalloc: each worker's heap (page areas: committed, used) before and after
its own release, summed over the workers, against the process's committed
bytes. What is committed outside every worker's pages (free spans of the
workers' segments, whose decommit 2.0.9 only carries out when that thread
allocates a new page in the segment) is the difference.
jemalloc: each arena (several workers share one) before the first and after
the last worker on it released: active, dirty, muzzy, resident, tcache bytes.
Standard library only.
"""
import json
import sys

M = 1 << 20


def find_trim(path):
    """The last TrimResult with per-worker stats in PATH (JSON or JSONL)."""
    found = []

    def walk(o):
        if isinstance(o, dict):
            if "workers" in o and "rss_between_bytes" in o:
                found.append(o)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit("trim_thread_stats: cannot read %s: %s" % (path, e.strerror))
    try:
        walk(json.loads(text))
    except ValueError:
        for line in text.splitlines():
            if line.strip():
                walk(json.loads(line))
    with_stats = [t for t in found if any("before" in w for w in t.get("workers", []))]
    if not with_stats:
        sys.exit("trim_thread_stats: no trim with per-worker stats in %s "
                 "(was the server run with --trim_thread_stats?)" % path)
    return with_stats[-1]


def i(d, k):
    return int(d.get(k, 0))


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    t = find_trim(argv[1])
    per_worker = "--workers" in argv[2:]
    workers = [w for w in t["workers"] if w.get("ran") and "before" in w]
    print("allocator %s  trigger %s  workers %d  rss %.1f -> %.1f (global) -> %.1f MiB (per-thread)"
          % (t.get("allocator"), t.get("trigger"), len(workers), i(t, "rss_before_bytes") / M,
             i(t, "rss_between_bytes") / M, i(t, "rss_after_bytes") / M))
    print("allocator resident %.1f -> %.1f -> %.1f MiB; thread call %s; after threads %s"
          % (i(t, "allocator_resident_before") / M, i(t, "allocator_resident_between") / M,
             i(t, "allocator_resident_after") / M, t.get("thread_call"),
             t.get("after_threads_call", "-")))
    if t.get("allocator") == "mimalloc":
        sums = {k: 0 for k in ("cb", "ca", "ub", "ua", "pb", "pa", "ra")}
        rows = []
        for w in workers:
            b, a = w["before"], w["after"]
            row = (i(b, "heap_committed_bytes"), i(a, "heap_committed_bytes"),
                   i(b, "heap_used_bytes"), i(a, "heap_used_bytes"),
                   i(b, "heap_pages"), i(a, "heap_pages"))
            for k, v in zip(("cb", "ca", "ub", "ua", "pb", "pa"), row):
                sums[k] += v
            sums["ra"] += max(0, i(a, "heap_reserved_bytes"))
            rows.append((w.get("worker", 0), row))
        if per_worker:
            print("worker  committed_mib before/after  used_mib before/after  pages before/after")
            for n, r in rows:
                print("%6d  %12.2f %12.2f  %9.2f %9.2f  %6d %6d" % (
                    n, r[0] / M, r[1] / M, r[2] / M, r[3] / M, r[4], r[5]))
        n = max(1, len(rows))
        print("workers' pages: committed %.1f -> %.1f MiB, used %.1f -> %.1f MiB, pages %d -> %d "
              "(per worker: committed %.2f -> %.2f MiB, used %.2f MiB)"
              % (sums["cb"] / M, sums["ca"] / M, sums["ub"] / M, sums["ua"] / M, sums["pb"],
                 sums["pa"], sums["cb"] / M / n, sums["ca"] / M / n, sums["ua"] / M / n))
        after = i(t, "allocator_resident_after")
        print("workers' pages span %.1f MiB after (reserved; committed counts carved blocks only)"
              % (sums["ra"] / M))
        print("process committed after %.1f MiB; outside the workers' pages %.1f MiB "
              "(free spans still committed, the main and gRPC threads' heaps, caches)"
              % (after / M, (after - max(sums["ra"], sums["ca"])) / M))
    elif t.get("allocator") == "jemalloc":
        first, last = {}, {}
        tc_b = tc_a = 0
        for w in workers:
            b, a = w["before"], w["after"]
            ar = i(b, "arena")
            first.setdefault(ar, b)
            last[ar] = a
        print("arena  workers  active_mib  dirty_mib  muzzy_mib  resident_mib  tcache_mib   "
              "(before the first worker on it -> after the last)")
        for ar in sorted(first):
            b, a = first[ar], last[ar]
            nw = sum(1 for w in workers if i(w["before"], "arena") == ar)
            tc_b += i(b, "arena_tcache_bytes")
            tc_a += i(a, "arena_tcache_bytes")
            print("%5d  %7d  %5.1f->%-5.1f %5.1f->%-5.1f %5.1f->%-5.1f %6.1f->%-6.1f %5.2f->%-5.2f" % (
                ar, nw, i(b, "arena_active_bytes") / M, i(a, "arena_active_bytes") / M,
                i(b, "arena_dirty_bytes") / M, i(a, "arena_dirty_bytes") / M,
                i(b, "arena_muzzy_bytes") / M, i(a, "arena_muzzy_bytes") / M,
                i(b, "arena_resident_bytes") / M, i(a, "arena_resident_bytes") / M,
                i(b, "arena_tcache_bytes") / M, i(a, "arena_tcache_bytes") / M))
        print("tcache bytes in the workers' arenas: %.2f -> %.2f MiB (then %s purged every arena)"
              % (tc_b / M, tc_a / M, t.get("after_threads_call", "-")))
    else:
        print("%s has no per-thread figures (glibc, tcmalloc): see the process-wide ones"
              % t.get("allocator"))
    pauses = sorted(i(w, "pause_us") for w in workers)
    if pauses:
        print("worker pause (us): median %d, max %d" % (pauses[len(pauses) // 2], pauses[-1]))


if __name__ == "__main__":
    main(sys.argv)
