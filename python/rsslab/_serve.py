"""rsslab.serve(): the Control service inside this process.

The rules and the answers are native (control/service, the same code as
rsslab_server's). Two transports: "native", a gRPC C++ server of the
package's own (_rsslab_grpc.so, loaded only then; answers even while a
handler holds the GIL); "grpcio", the
process's own grpcio (_control_grpcio.py: no second gRPC core, so a few
MiB less RSS). "auto" takes grpcio when the process has already imported
it, native otherwise. This file checks the arguments and publishes the bound
address where `rsslab_ctl inspect --pid=PID` looks for it:
DIR/rsslab-control-<pid>.addr, DIR = $XDG_RUNTIME_DIR of the start
environment if it names a directory, else /tmp; one line HOST:PORT, mode 0600, written atomically,
removed at stop while it still holds this address.
"""

import importlib
import os
import sys

from . import _rsslab as _native

_addr_file = None
_address = None
_transport = ""
_TRANSPORTS = ("auto", "grpcio", "native")


def _addr_dir():
    # The start environment, which is what inspect reads (/proc/PID/environ).
    d = ""
    try:
        with open("/proc/self/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"XDG_RUNTIME_DIR="):
                    d = os.fsdecode(item.split(b"=", 1)[1])
                    break
    except OSError:
        d = os.environ.get("XDG_RUNTIME_DIR", "")
    return d if d and os.path.isdir(d) else "/tmp"


def _publish(address):
    global _addr_file
    d = _addr_dir()
    final = os.path.join(d, "rsslab-control-%d.addr" % os.getpid())
    tmp = os.path.join(d, ".rsslab-control-%d.addr.tmp" % os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(address + "\n")
        os.replace(tmp, final)
        _addr_file = final
    except OSError as e:
        print("rsslab: could not write the Control address file %s: %s" % (final, e),
              file=sys.stderr)


def _pick(transport):
    if not isinstance(transport, str) or transport not in _TRANSPORTS:
        raise ValueError("serve(transport=) must be one of %s, got %r"
                         % (", ".join(_TRANSPORTS), transport))
    if transport == "auto":
        return "grpcio" if "grpc" in sys.modules else "native"
    if transport == "grpcio":
        try:
            import grpc  # noqa: F401
        except ImportError as e:
            raise ValueError("serve(transport='grpcio') needs grpcio importable (Debian: "
                             "python3-grpcio; a venv made with --system-site-packages): %s"
                             % e) from None
    return transport


# Each transport's module: bind(address) or start(address, hooks) -> port
# (0: cannot), and stop().
_MODULES = {"grpcio": "rsslab._control_grpcio", "native": "rsslab._rsslab_grpc"}


def _bind(transport, control, server, server_port):
    module = importlib.import_module(_MODULES[transport])  # native: loads gRPC C++, only here
    if server is not None:
        module.attach(server)
        return server_port
    if transport == "grpcio":
        return module.bind(control)
    return module.start(control, _native.control_hooks())


def _unbind(transport):
    # The watch streams end first, so the server's wait for its calls is short.
    _native.end_control_watches()
    module = sys.modules.get(_MODULES[transport])  # None: its import failed
    if module is not None:
        module.stop()
    _native.stop_serving()


def _listen(transport, control, token, server, server_port):
    _native.open_control_calls(control, token)  # ValueError: address, token, listen rule
    try:
        port = _bind(transport, control, server, server_port)
        if not port:
            raise ValueError("cannot listen on %s (in use, or not an address of this host)"
                             % control)
    except BaseException:
        _unbind(transport)
        raise
    return _native.control_calls_bound(port)


def _check_server(server, control, transport):
    """serve(server=): the service's own grpc.server, and the port it listens on."""
    try:
        import grpc
    except ImportError as e:
        raise ValueError("serve(server=) takes a grpc.Server, and grpcio is not importable: %s"
                         % e) from None
    if not isinstance(server, grpc.Server):
        raise TypeError("serve(server=) must be a grpc.Server (the service's own), got %s"
                        % type(server).__name__)
    if transport not in ("auto", "grpcio"):
        raise ValueError("serve(server=) shares that grpcio server; transport=%r needs a port "
                         "of its own (leave server= out)" % (transport,))
    port = control.rsplit(":", 1)[1] if isinstance(control, str) and ":" in control else ""
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("serve(server=) needs control='HOST:PORT' naming where that server "
                         "listens (the port add_insecure_port returned), got %r" % (control,))
    return int(port)


def serve(control, metrics, token_file, transport="auto", server=None):
    global _address, _transport
    import rsslab
    if not isinstance(control, str) or ":" not in control:
        raise ValueError("serve(control=) must be 'host:port' (port 0 = any free one), got %r"
                         % (control,))
    if len(control) > 255:
        raise ValueError("serve(control=) is longer than 255 characters")
    if metrics is not None and (not isinstance(metrics, str) or len(metrics) > 255
                                or not metrics.rsplit(":", 1)[-1].isdigit()):
        raise ValueError("serve(metrics=) must be 'host:port' or 'port' (0 = any free one), "
                         "got %r" % (metrics,))
    if token_file is not None and not isinstance(token_file, (str, os.PathLike)):
        raise TypeError("serve(token_file=) must be a path or None")
    if _address is not None:
        raise RuntimeError("the Control service already listens on %s (one per process; "
                           "rsslab.stop() ends it)" % _address)
    server_port = _check_server(server, control, transport) if server is not None else 0
    chosen = _pick(transport)
    token = os.fspath(token_file) if token_file is not None else ""
    address = _listen(chosen, control, token, server, server_port)
    _address, _transport = address, chosen
    if metrics is not None:
        try:
            rsslab._metrics_address = _native.serve_metrics(metrics)
        except ValueError:
            _unbind(_transport)
            _address, _transport = None, ""
            raise
    rsslab._control_address = address
    _publish(address)
    return address


def transport():
    return _transport


def stop():
    global _address, _addr_file, _transport
    if _address is None:
        return
    _unbind(_transport)
    if _addr_file is not None:
        try:
            with open(_addr_file) as f:
                mine = f.read().strip() == _address
            if mine:
                os.unlink(_addr_file)
        except OSError:
            pass
    _address = None
    _addr_file = None
    _transport = ""
