"""auto_trim() and count_request(): the server's automatic trim policy run
on a native thread, and the request count it can watch."""

import math
import numbers

from . import _rsslab as _native
from ._checks import _check_int


def _auto_trim_number(keyword, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("auto_trim(%s=) must be a number, got %s" % (keyword, type(value).__name__))
    try:
        value = float(value)
    except OverflowError:
        value = math.inf  # refused below, as out of range
    _native.check_auto_trim(keyword, value)  # ValueError naming auto_trim(keyword=)
    return value


def auto_trim(mode="after_burst", *, signal="auto", gap_mb=16, settle_s=2.0,
              settle_fraction=0.1, interval_s=60.0, min_spacing_s=10.0, tick_s=0.2):
    """Runs the server's automatic trim policy on a native thread (no GIL).

    mode: "after_burst" (once load has dropped for settle_s, if RSS exceeds
    the live estimate by gap_mb), "interval" (every interval_s), or None /
    "off" to stop. signal: "requests" (counted by grpc_interceptor() or
    count_request()), "cpu" (process CPU time), or "auto" (CPU time until
    the first request is counted). Never two trims within min_spacing_s.
    """
    if mode is None or mode == "off":
        _native.stop_auto_trim()
        return None
    # Modes and ranges: the one table in common/auto_trim_table.h, the
    # server's --auto_trim* flags' too.
    _native.check_auto_trim_mode(mode if isinstance(mode, str) else repr(mode),
                                 "auto_trim(mode=)")
    if signal not in ("auto", "requests", "cpu"):
        raise ValueError("auto_trim(signal=) must be auto, requests or cpu; got %r" % (signal,))
    gap_mb = _auto_trim_number("gap_mb", gap_mb)
    settle_s = _auto_trim_number("settle_s", settle_s)
    settle_fraction = _auto_trim_number("settle_fraction", settle_fraction)
    interval_s = _auto_trim_number("interval_s", interval_s)
    min_spacing_s = _auto_trim_number("min_spacing_s", min_spacing_s)
    tick_s = _auto_trim_number("tick_s", tick_s)
    _native.start_auto_trim(mode, signal, gap_mb, settle_s, settle_fraction, interval_s,
                            min_spacing_s, tick_s)
    return _native.auto_trim_state()


def count_request(n=1):
    """Counts n served requests for auto_trim's load signal."""
    _native.count_request(_check_int("count_request(n)", n, 1, 1 << 40))
