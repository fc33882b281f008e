"""A handler that fails to import (for the start-up error test)."""

import this_module_does_not_exist_rsslab  # noqa: F401


def handle(request, cache):
    return None
