"""Argument checks the package's functions share: one line naming the
argument, its range and what it got."""

import math
import numbers


def _check_number(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number, got %s" % (name, type(value).__name__))
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError("%s must be between %s and %s, got %r" % (name, low, high, value))
    return float(value)


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, got %s" % (name, type(value).__name__))
    if not low <= value <= high:
        raise ValueError("%s must be between %d and %d, got %d" % (name, low, high, value))
    return int(value)
