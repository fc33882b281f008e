"""Never finishes importing (blocks in C): the server must still answer
SIGTERM/SIGINT while it waits for the handler."""
import threading

threading.Event().wait()


def handle(request, cache):
    return None
