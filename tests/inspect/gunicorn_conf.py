"""gunicorn settings for inspect's pre-fork test: two gthread workers on a
loopback port the kernel picks; the ready line once the master is up."""
bind = "127.0.0.1:0"
workers = 2
worker_class = "gthread"
threads = 4


def when_ready(server):
    print(f"inspect_target ready pid={server.pid}", flush=True)
