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
environment if it names a directory, else /tmp; mode 0600, written atomically,
removed at stop while it still holds this address. Its lines: HOST:PORT,
service=NAME, pid=PID, start=TICKS (/proc/self/stat field 22), and
metrics=HOST:PORT with serve(metrics=...), so that every
worker of a pre-fork service is found by its name (`rsslab_ctl
--control=all:NAME`) and a reader can tell a reused pid (registry/registry.h).
"""

import importlib
import os
import sys

from . import _rsslab as _native

_control_address = ""  # control_address(): set once serve() has bound and published
_metrics_address = ""
_addr_file = None
_addr_pid = 0  # the process that wrote _addr_file: only it removes it
_address = None
_transport = ""
_service = ""
# gRPC's threads do not survive fork(): once a transport has started gRPC
# here, a forked child cannot serve with it (its calls would never be read).
_grpc_started = False
_forked_after_grpc = False
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


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _default_name():
    """$RSSLAB_SERVICE, else the program's name: the script without .py, the
    package of `python3 -m PKG` (gunicorn), "python" for `-c`; characters
    outside A-Z a-z 0-9 . _ - become _, at most 64."""
    name = os.environ.get("RSSLAB_SERVICE", "")
    if not name:
        argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else "python"
        base = os.path.basename(argv0)
        if base == "__main__.py":
            base = os.path.basename(os.path.dirname(os.path.abspath(argv0)))
        name = base[:-3] if base.endswith(".py") else base
    return "".join(c if c in _NAME_CHARS else "_" for c in name)[:64] or "python"


def _check_name(name):
    if name is None:
        return _default_name()
    if (not isinstance(name, str) or not 1 <= len(name) <= 64
            or not set(name) <= _NAME_CHARS):
        raise ValueError("serve(name=) must be 1 to 64 characters of A-Z a-z 0-9 . _ -, got %r"
                         % (name,))
    return name


def _start_ticks():
    # Field 22 of /proc/self/stat; the name (field 2) may hold spaces and ')'.
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def _tmp_suffix():
    return os.urandom(8).hex()


def _create_tmp(d):
    # A fresh file of our own: never one another user made, nor a symlink's
    # target (O_EXCL fails on any existing name, a dangling symlink too), so
    # the entry renamed into place is ours. The name is random: in /tmp
    # anyone can create files, so a name known in advance can be taken.
    for _ in range(16):
        tmp = os.path.join(d, ".rsslab-control-%d.%s.tmp" % (os.getpid(), _tmp_suffix()))
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
    raise FileExistsError("16 temporary names in %s were taken" % d)


def _publish(address, name):
    global _addr_file, _addr_pid
    d = _addr_dir()
    final = os.path.join(d, "rsslab-control-%d.addr" % os.getpid())
    tmp = None
    try:
        tmp, fd = _create_tmp(d)
        with os.fdopen(fd, "w") as f:
            f.write("%s\nservice=%s\npid=%d\nstart=%d\n"
                    % (address, name, os.getpid(), _start_ticks()))
            f.write("metrics=%s\n" % _metrics_address if _metrics_address else "")
        os.replace(tmp, final)
        tmp = None
        _addr_file = final
        _addr_pid = os.getpid()
    except OSError as e:
        print("rsslab: could not write the Control address file %s: %s" % (final, e),
              file=sys.stderr)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _pick(transport):
    if not isinstance(transport, str) or transport not in _TRANSPORTS:
        raise ValueError("serve(transport=) must be one of %s, got %r"
                         % (", ".join(_TRANSPORTS), transport))
    if transport == "auto":
        return "grpcio" if "grpc" in sys.modules else "native"
    if transport == "grpcio":
        import rsslab
        rsslab._require_grpc("serve(transport='grpcio')")
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
    global _grpc_started
    _grpc_started = True
    return _native.control_calls_bound(port)


def _check_server(server, control, transport):
    """serve(server=): the service's own grpc.server, and the port it listens on."""
    import rsslab
    rsslab._require_grpc("serve(server=)")
    import grpc
    import grpc.aio
    if isinstance(server, grpc.aio.Server):
        raise TypeError("serve(server=) cannot share a grpc.aio server (its handlers run on "
                        "an event loop, Control's block): leave server= out and Control gets "
                        "a port of its own")
    if not isinstance(server, grpc.Server):
        raise TypeError("serve(server=) must be a grpc.Server (the service's own), got %s"
                        % type(server).__name__)
    if transport not in ("auto", "grpcio"):
        raise ValueError("serve(server=) shares that grpcio server; transport=%r needs a port "
                         "of its own (leave server= out)" % (transport,))
    port = control.rsplit(":", 1)[1] if isinstance(control, str) and ":" in control else ""
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError("serve(server=) needs control='HOST:PORT' naming where that server "
                         "listens (the port add_insecure_port returned), got %r" % (control,))
    return int(port) or _only_listening_port()


def _only_listening_port():
    """serve(server=) without a port: the one TCP port this process listens on."""
    sockets = _listening_sockets()
    if sockets is None:
        raise ValueError("serve(server=): cannot list this process's listening sockets "
                         "(/proc/self/fd); name the server's with control='127.0.0.1:PORT'")
    ports = sorted({p for _, p in sockets})
    if len(ports) == 1:
        return ports[0]
    if not ports:
        raise ValueError("serve(server=): this process listens on no TCP port yet; call it "
                         "after server.add_insecure_port(...)")
    raise ValueError("serve(server=): this process listens on ports %s; name the server's "
                     "with control='127.0.0.1:PORT' (the port add_insecure_port returned)"
                     % ", ".join(map(str, ports[:16])))


def _listening_sockets():
    """(host, port) of every listening TCP socket of this process, or None
    when they cannot all be known. Each socket descriptor in /proc/self/fd
    is asked itself (a dup of it: SO_ACCEPTCONN, getsockname), so a socket
    of another network namespace counts as well."""
    import errno
    import socket
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found = []
    for fd in fds:
        try:
            if not os.readlink("/proc/self/fd/" + fd).startswith("socket:["):
                continue
            dup = os.dup(int(fd))
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EBADF):  # closed meanwhile
                continue
            return None
        try:
            s = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        try:
            if (s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM
                    and s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)):
                name = s.getsockname()
                found.append((_host_text(name[0]), name[1]))
        except OSError:
            return None
        finally:
            s.close()
    return found


def _host_text(host):
    import ipaddress
    ip = ipaddress.ip_address(host.split("%", 1)[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip) if ip.version == 4 else "[%s]" % ip


def _check_server_addresses(server_port, token):
    """The listen rule for every TCP socket this process listens on: a token
    whenever any is beyond loopback. grpcio cannot say which sockets are the
    given server's, and that server answers Control on each of its ports, so
    every listening socket of the process counts, whatever control= names."""
    sockets = _listening_sockets()
    if sockets is None:
        raise ValueError("serve(server=): cannot list this process's listening sockets "
                         "(/proc/self/fd), so whether Control would be reachable beyond "
                         "loopback cannot be known; not serving")
    if not any(p == server_port for _, p in sockets):
        raise ValueError("serve(server=): no socket of this process listens on port %d, so "
                         "where Control would be reachable cannot be known (call serve() after "
                         "server.add_insecure_port(...) returned that port)" % server_port)
    addresses = sorted({"%s:%d" % hp for hp in sockets})
    for a in addresses:
        try:
            _native.check_control_listen(a, token)
        except ValueError as e:
            raise ValueError("serve(server=): this process listens on %s (that server may own it, "
                             "and would then answer Control there): %s" % (a, e)) from None
    return addresses


def serve(control, metrics, token_file, transport="auto", server=None, name=None):
    global _address, _transport, _service, _control_address, _metrics_address
    name = _check_name(name)
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
    if _forked_after_grpc:
        raise RuntimeError("serve() in a child forked after its parent served Control: gRPC "
                           "cannot serve in a process forked after it started; call "
                           "rsslab.serve() in each worker, not before the fork "
                           "(docs/PACKAGE.md, \"Pre-fork servers\")")
    server_port = _check_server(server, control, transport) if server is not None else 0
    if server_port:
        control = "%s:%d" % (control.rsplit(":", 1)[0], server_port)
    chosen = _pick(transport)
    token = os.fspath(token_file) if token_file is not None else ""
    if server is not None:
        _check_server_addresses(server_port, token)
    address = _listen(chosen, control, token, server, server_port)
    _address, _transport = address, chosen
    if metrics is not None:
        try:
            _metrics_address = _native.serve_metrics(metrics)
        except ValueError:
            _unbind(_transport)
            _address, _transport = None, ""
            raise
    _control_address = address
    _service = name
    _publish(address, name)
    return address


def transport():
    return _transport


def control_address():
    return _control_address


def metrics_address():
    return _metrics_address


def service_name():
    return _service


def after_fork_in_child():
    """The parent's Control and address file are the parent's alone."""
    global _address, _addr_file, _addr_pid, _transport, _forked_after_grpc
    global _control_address, _metrics_address
    _address, _addr_file, _addr_pid, _transport = None, None, 0, ""
    _control_address = _metrics_address = ""
    _forked_after_grpc = _forked_after_grpc or _grpc_started
    module = sys.modules.get(_MODULES["grpcio"])
    if module is not None:
        module.after_fork_in_child()


def stop():
    global _address, _addr_file, _transport, _control_address, _metrics_address
    _control_address = _metrics_address = ""
    if _address is None:
        return
    _unbind(_transport)
    if _addr_file is not None and _addr_pid == os.getpid():
        try:
            with open(_addr_file) as f:
                mine = f.readline().strip() == _address
            if mine:
                os.unlink(_addr_file)
        except OSError:
            pass
    _address = None
    _addr_file = None
    _transport = ""
