"""Never finishes importing (blocks in C): the server must still answer
SIGTERM/SIGINT while it waits for the handler. Creates the file named by
$RSSLAB_TEST_MARKER first, so a test knows the import has begun."""
import os
import threading

_marker = os.environ.get("RSSLAB_TEST_MARKER")
if _marker:
    open(_marker, "w").close()
threading.Event().wait()


def handle(request, cache):
    return None
