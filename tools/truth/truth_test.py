#!/usr/bin/python3
"""//tools/truth:truth_test: rsslab_server against a plain /usr/bin/python3
doing the same work (tools/truth/truth.py), at a reduced seed 000 shape.

Cells: every allocator family (glibc, glibc-arena2, jemalloc, mimalloc
2.0.9, mimalloc3, mimalloc3-purge0, tcmalloc) at 16 and at 1 worker
threads, two cells at a time (each cell is two processes of its own).

The shape: 2,000 warm-up requests at cache limit 0, then a release (the
server's trim; the reference releases the same way on each thread), then
the start record: every worker thread of both sides has taken its first
memory (at 256 only some of the reference's 16 had), and what the warm-up
freed is not in either start (the host's gRPC threads left more of it,
which the workload then reused, so its figures came out low). Then fill
28,800 requests at a 20 MiB cache (the fill stores about 5x the limit; the
churn is what made the host's mimalloc 3 excess show), shrink to 2 MiB and
9,600 requests, 3 s of idle (longer than mimalloc 3's 2.5 s purge delay).
At a 12 MiB cache the after-idle figures were 3-15 MiB and moved by up to
2x between runs of one build.
Both sides free the shrink's evicted bodies on a long-lived control
thread, oldest first, and read RSS after gc.collect() on that thread.
Each cell fails when the host's fill or after-idle RSS above its start
differs from the reference's beyond BOUND in every try (below; docs/TESTING.md, "The server against a plain Python process", has the
runs behind it); the table of every cell, with both sides' allocator
statistics, is printed either way, and written (truth.md, and cells.jsonl
with every phase's figures) to the test's undeclared outputs. The mimalloc
3 profiles need .deps/mimalloc3 (./rsslab setup): without it their cells
are printed as SKIP lines naming why.
"""

import os
import shutil
import sys
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
sys.path.insert(0, os.path.join(WS, "tools", "truth"))
import truth  # noqa: E402

PROFILES = "glibc,glibc-arena2,jemalloc,mimalloc,mimalloc3,mimalloc3-purge0,tcmalloc"
# Under load within 25 % of the plain process either way, after idle at
# most 25 % above it; a difference of at most 10 MiB (half the fill's cache)
# passes at any ratio: at 1 worker the host's extra threads keep a few MiB
# of free memory in arenas of their own (glibc: 3-9 MiB, +15 to +45 % of the
# small 1-worker figures), while the host fix reverted is 28 to 38 MiB over. After idle the host may hold less:
# whether an allocator's deferred returns of the shrink's evictions ran
# before the reading (jemalloc's 10 s decay, mimalloc 3's 2.5 s purge
# delay, 2.0.9's pending cross-thread frees) depends on each side's pace and
# on who calls into the allocator meanwhile, and the host is slower and has
# gRPC's threads (its returns ran where the plain process's did not, -30 to
# -70 % at 1 thread); the test is there for a host that holds more. A cell
# beyond its bound is measured again, twice at most, and fails only if every
# try does; the host fix reverted fails every try (+41 to +122 % under load).
# docs/TESTING.md, "The server against a plain Python process", has the runs.
BOUND = ["--bound=0.25", "--idle_bound=0.25", "--idle_below_bound=0", "--floor_mib=10",
         "--retry_failed=2"]
SHAPE = ["--warm_requests=2000", "--fill_requests=28800", "--shrink_requests=9600",
         "--fill_limit_mb=20", "--shrink_limit_mb=2", "--idle_s=3", "--parallel=2"]


def main():
    outputs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or os.environ["TEST_TMPDIR"]
    t0 = time.monotonic()
    work = os.path.join(os.environ["TEST_TMPDIR"], "truth")
    argv = ["--profiles=" + PROFILES, "--threads=16,1"] + BOUND + [
            "--rsslab_run=" + os.path.join(WS, "agent/rsslab_run"),
            "--rsslab_server=" + os.path.join(WS, "server/rsslab_server"),
            "--rsslab_loadgen=" + os.path.join(WS, "loadgen/rsslab_loadgen"),
            "--profiles_file=" + os.path.join(WS, "agent/profiles.textproto"),
            "--handler=" + os.path.join(WS, "server/handlers/web_worker.py"),
            "--out=" + work, "--markdown=" + os.path.join(outputs, "truth.md")] + SHAPE
    failed = truth.main(argv)
    cells = os.path.join(work, "cells.jsonl")
    if os.path.isfile(cells):  # every cell's figures, for whoever reads the failure
        shutil.copy(cells, os.path.join(outputs, "cells.jsonl"))
    print("truth_test: %s in %.0f s" % ("passed" if failed == 0 else "FAILED (exit %d)" % failed,
                                         time.monotonic() - t0))
    return failed


if __name__ == "__main__":
    sys.exit(main())
