#!/usr/bin/python3
"""//tools/truth:truth_test: rsslab_server against a plain /usr/bin/python3
doing the same work (tools/truth/truth.py), at a reduced seed 000 shape, for
every allocator family at 1 and 16 worker threads.

The shape is seed 000's at a fifth: fill 19,200 requests at a 20 MiB cache
(the fill stores about 3.5x the limit, as seed 000's does at 100 MiB),
shrink to 2 MiB and 9,600 requests, 3 s of idle (longer than mimalloc 3's
2.5 s purge delay). Each cell fails when the host's fill or after-idle RSS
above its start differs from the reference's by more than 25 % of the
reference's; the table of every cell is printed either way, and written
(truth.md, and cells.jsonl with every phase's RSS of both sides) to the
test's undeclared outputs. The mimalloc 3
profiles need .deps/mimalloc3 (./rsslab setup): without it their cells are
printed as SKIP lines naming why.
"""

import os
import shutil
import sys
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
sys.path.insert(0, os.path.join(WS, "tools", "truth"))
import truth  # noqa: E402

PROFILES = "glibc,glibc-arena2,jemalloc,mimalloc,mimalloc3,mimalloc3-purge0,tcmalloc"
SHAPE = ["--fill_requests=19200", "--shrink_requests=9600", "--fill_limit_mb=20",
         "--shrink_limit_mb=2", "--idle_s=3"]


def main():
    outputs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR") or os.environ["TEST_TMPDIR"]
    work = os.path.join(os.environ["TEST_TMPDIR"], "truth")
    argv = ["--profiles=" + PROFILES, "--threads=1,16", "--bound=0.25",
            "--rsslab_run=" + os.path.join(WS, "agent/rsslab_run"),
            "--rsslab_server=" + os.path.join(WS, "server/rsslab_server"),
            "--rsslab_loadgen=" + os.path.join(WS, "loadgen/rsslab_loadgen"),
            "--profiles_file=" + os.path.join(WS, "agent/profiles.textproto"),
            "--handler=" + os.path.join(WS, "server/handlers/web_worker.py"),
            "--out=" + work,
            "--markdown=" + os.path.join(outputs, "truth.md")] + SHAPE
    t0 = time.monotonic()
    rc = truth.main(argv)
    if os.path.isfile(os.path.join(work, "cells.jsonl")):  # every cell's figures, for whoever reads the failure
        shutil.copy(os.path.join(work, "cells.jsonl"), outputs)
    print("truth_test: %s in %.0f s" % ("passed" if rc == 0 else "FAILED (exit %d)" % rc,
                                         time.monotonic() - t0))
    return rc


if __name__ == "__main__":
    sys.exit(main())
