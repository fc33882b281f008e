#!/usr/bin/python3
"""//tools/truth:truth_retry_test: tools/truth/truth.py's --retry_failed.

A cell beyond its bound is measured again, each try in a directory of its
own (a run never writes over another: the first version of the retry gave
the loadgen the first try's --out, which it refuses), and fails only if
every try does. The measuring itself is //tools/truth:truth_test's; here it
is replaced by a stand-in that reports the figures given to it, so the
bookkeeping around it is what is checked.
"""

import argparse
import json
import os
import sys
import tempfile

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
sys.path.insert(0, os.path.join(WS, "tools", "truth"))
import truth  # noqa: E402

failures = []


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def run(out, outcomes, retry_failed):
    """run_cells over one cell whose tries report `outcomes` in turn."""
    dirs = []

    def stand_in(tools, a, profile, threads, scenario, attempt=1):
        d = truth.cell_dir(a, profile, threads, attempt)
        check(not os.path.exists(d), "try %d gets a directory no other try used: %s" % (attempt, d))
        os.makedirs(d)
        dirs.append(d)
        dev = outcomes[attempt - 1]
        status = "FAIL" if abs(dev) > a.bound else "pass"
        return {"profile": profile, "threads": threads, "status": status,
                "fill": {"deviation": dev}, "idle": {"deviation": 0.0},
                "reference_s": 0, "host_s": 0}

    os.makedirs(out)
    a = argparse.Namespace(out=out, threads=[1], parallel=1, retry_failed=retry_failed, bound=0.25)
    real, truth.measure = truth.measure, stand_in
    try:
        cells = truth.run_cells(None, a, ["glibc"], {"glibc": None}, "scenario")
    finally:
        truth.measure = real
    with open(os.path.join(out, "cells.jsonl")) as f:
        kept = [json.loads(line) for line in f]
    return cells[0], dirs, kept


def main():
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    # Fails, then passes: the cell passes, the first try is kept in the table.
    cell, dirs, kept = run(os.path.join(tmp, "a"), [0.5, 0.1], retry_failed=2)
    check(cell["status"] == "pass", "a failed try then a passing one: the cell passes")
    check(len(dirs) == 2 and len(set(dirs)) == 2, "two tries, two directories: %s" % dirs)
    check(cell.get("earlier_tries") == ["fill +50 % idle +0 %"],
          "the earlier try's deviations are kept: %s" % cell.get("earlier_tries"))
    check(len(kept) == 1 and kept[0]["status"] == "pass", "cells.jsonl has the cell once, as it ended")
    # Fails every try: the cell fails after 1 + retry_failed tries.
    cell, dirs, _ = run(os.path.join(tmp, "b"), [0.6, 0.7, 0.8, 0.9], retry_failed=2)
    check(cell["status"] == "FAIL" and len(dirs) == 3,
          "fails every try: FAIL after 3 tries (%s, %d tries)" % (cell["status"], len(dirs)))
    # Passes at once: measured once.
    cell, dirs, _ = run(os.path.join(tmp, "c"), [0.1], retry_failed=2)
    check(cell["status"] == "pass" and len(dirs) == 1 and "earlier_tries" not in cell,
          "passes at once: one try, no earlier tries")
    # No retries asked for: one failing try fails the cell.
    cell, dirs, _ = run(os.path.join(tmp, "d"), [0.5, 0.1], retry_failed=0)
    check(cell["status"] == "FAIL" and len(dirs) == 1, "--retry_failed=0: one try, FAIL")
    # Numbers from a peer's JSON or ready line: ASCII digits only.
    check(truth.decimal("12345") == 12345 and truth.decimal(7) == 7, "decimal: plain digits")
    for bad in ("\u0663", "\u00b2", "12a", "-1", " 5", "", "1" * 21):
        check(truth.decimal(bad) is None, "decimal refuses %r" % bad)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
