"""A handler that does what a careless or hostile one might.

  do=exit        sys.exit(4)
  do=exit0       raise SystemExit(0)
  do=kbd         raise KeyboardInterrupt
  do=base        raise a BaseException subclass of its own
  do=spin        loop in Python forever (the per-request budget stops it)
  do=block       block in C forever (nothing inside the process stops it)
  do=valueerror  raise ValueError (an ordinary error, for the log limit)
  do=regex       hold the GIL in one long C call: a catastrophic regular
                 expression match (n=30 by default; each +1 doubles it)
  do=bigraise    raise ValueError with 10 MB of text holding ESC, CR and LF
anything else answers normally.
"""

import re
import sys
import threading


class Escape(BaseException):
    pass


def handle(request, cache):
    do = request["params"].get("do", "")
    if do == "exit":
        sys.exit(4)
    if do == "exit0":
        raise SystemExit(0)
    if do == "kbd":
        raise KeyboardInterrupt
    if do == "base":
        raise Escape("not an Exception")
    if do == "spin":
        while True:
            pass
    if do == "block":
        threading.Event().wait()
    if do == "regex":
        n = int(request["params"].get("n", "30"))
        re.match(r"(a+)+$", "a" * n + "b")
    if do == "bigraise":
        raise ValueError("\x1b[2J\r\nrsslab_server: FORGED LINE\n" + "x" * (10 << 20))
    if do == "valueerror":
        raise ValueError("bad value %s" % request["seed"])
    return {"body_size": 1}
