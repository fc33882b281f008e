#!/usr/bin/python3
"""A launched program that shows the argv it was given (//tests/anysvc).

Prints one line, `argv ready control=VALUE ARGV_JSON`, VALUE being its
--control=VALUE argument ("-" without one) and ARGV_JSON its sys.argv[1:]
as a JSON list, then waits. It keeps Python's default SIGTERM handling: a
SIGTERM kills it (as a plain Python service dies on Stop).
"""

import json
import sys
import time

control = "-"
for a in sys.argv[1:]:
    if a.startswith("--control="):
        control = a[len("--control="):]
print("argv ready control=%s %s" % (control, json.dumps(sys.argv[1:])), flush=True)
while True:
    time.sleep(3600)
