"""python3 -m rsslab run [--control=ADDR] [--transport=T] [--auto_trim=MODE] [--cap_arenas=N] -- script.py ARGS

Runs a script nobody may edit with the package active from its first line:
the arena cap applied before the script creates a thread, every
ThreadPoolExecutor it creates tracked (so release() reaches grpcio's
workers), the automatic trim running, the Control service listening.
Usage errors: one line, exit 2.
"""

import argparse
import os
import runpy
import sys


def _usage(msg):
    print("python3 -m rsslab run: %s" % msg, file=sys.stderr)
    sys.exit(2)


def main(argv):
    if not argv or argv[0] != "run":
        _usage("the only command is run: python3 -m rsslab run [--control=ADDR] "
               "[--auto_trim=MODE] [--cap_arenas=N] -- script.py ARGS...")
    argv = argv[1:]
    if "--" in argv:
        i = argv.index("--")
        opts, rest = argv[:i], argv[i + 1:]
    else:
        opts, rest = [], argv
        while rest and rest[0].startswith("--"):
            opts.append(rest.pop(0))
    p = argparse.ArgumentParser(prog="python3 -m rsslab run", add_help=True)
    p.add_argument("--control", default=None, help="serve Control on HOST:PORT (port 0: any)")
    # Checked against the one table of modes once rsslab is imported.
    p.add_argument("--auto_trim", default=None, metavar="MODE",
                   help="as rsslab.auto_trim(mode=); off by default")
    p.add_argument("--cap_arenas", type=int, default=None)
    p.add_argument("--token_file", default=None)
    p.add_argument("--name", default=None,
                   help="the service's name for rsslab_ctl --control=all:NAME "
                        "(default: $RSSLAB_SERVICE, else the script's name)")
    # The script has not imported grpc yet, so auto means native here.
    p.add_argument("--transport", default="auto", choices=["auto", "grpcio", "native"],
                   help="Control over the script's grpcio or the package's gRPC C++")
    p.error = _usage  # one line, exit 2
    a = p.parse_args(opts)
    if not rest:
        _usage("no script given (… -- script.py ARGS)")
    script = rest[0]
    if not os.path.isfile(script):
        _usage("%s is not a file" % script)

    import rsslab
    if a.auto_trim is not None:
        try:
            rsslab._native.check_auto_trim_mode(a.auto_trim, "--auto_trim")
        except ValueError as e:
            _usage(str(e))
    if a.cap_arenas is not None:
        try:
            r = rsslab.cap_arenas(a.cap_arenas)
            print("rsslab: %s" % r["detail"], file=sys.stderr)
        except (ValueError, TypeError) as e:
            _usage(str(e))
        except rsslab.ArenaCapError as e:
            print("rsslab: %s" % e, file=sys.stderr)
            sys.exit(1)
    rsslab.track_all()
    if a.auto_trim and a.auto_trim != "off":
        rsslab.auto_trim(a.auto_trim)
    if a.control:
        try:
            sys.argv = rest  # the default name is the script's, not this module's
            addr = rsslab.serve(a.control, token_file=a.token_file, transport=a.transport,
                                name=a.name)
        except (ValueError, TypeError) as e:
            _usage("%s: %s" % ("--name" if str(e).startswith("serve(name=)") else "--control", e))
        print("rsslab: control %s" % addr, file=sys.stderr, flush=True)
    sys.argv = rest
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
