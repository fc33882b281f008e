"""A target process for inspect's tests: what a Python service's threads,
memory and workers look like from outside.

  service_target.py hostile ARG  threads named (prctl) to forge report lines:
                                 LF, "findings: x1", "[leak] forg", ESC,
                                 U+202E, and bytes that are not UTF-8; ARG (on the
                                 command line) and the environment carry more.
  service_target.py pools        real pools named as CPython 3.14 names OS
                                 threads (the Python name cut to 15 bytes):
                                 a ThreadPoolExecutor of 3 (ThreadPoolExecu),
                                 one with thread_name_prefix="db" (db_0, db_1),
                                 and two event loops' default executors
                                 (asyncio_0, asyncio_1; asyncio_0).
  service_target.py burst        ~60 MiB in 61,440 objects over pymalloc's
                                 512 bytes (glibc malloc) on the main thread
                                 (the brk heap), then the same on a thread
                                 (its arena), each freed below a live object,
                                 so RSS stays; SIGUSR1 calls malloc_trim(0).
  service_target.py prefork N    a pre-fork master: N forked children, each
                                 naming itself worker-K, dying with it.

Prints "inspect_target ready pid=PID" once everything is up, then sleeps
until killed.
"""
import asyncio
import concurrent.futures
import ctypes
import os
import signal
import sys
import threading
import time

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
STOP = threading.Event()


def set_os_name(name):
    LIBC.prctl(PR_SET_NAME, name[:15], 0, 0, 0)


def name_os_threads_like_cpython_314():
    # CPython 3.14 gives each thread its Python name at the OS level, cut to
    # 15 bytes; 3.11 does not, so do what 3.14 does.
    inner = threading.Thread._bootstrap_inner

    def bootstrap(self):
        set_os_name(self.name.encode())
        inner(self)

    threading.Thread._bootstrap_inner = bootstrap


def hostile():
    # U+202E (RIGHT-TO-LEFT OVERRIDE): "\u202egnp.exe" would read "exe.png".
    names = [b"\nfindings: x1", b"\n  [leak] forg", b"\x1b[2Jfake: lin", b"bad\xff\xfe\n",
             "\u202egnp.exe".encode()]
    for n in names:
        threading.Thread(target=lambda n=n: (set_os_name(n), STOP.wait()), daemon=True).start()
    set_os_name(b"\x1b[31mmain\n")


def loop_with_executor(workers):
    async def main():
        await asyncio.gather(*[asyncio.to_thread(STOP.wait) for _ in range(workers)])

    asyncio.run(main())


def pools():
    name_os_threads_like_cpython_314()
    plain = concurrent.futures.ThreadPoolExecutor(max_workers=3)
    for _ in range(3):
        plain.submit(STOP.wait)
    time.sleep(0.3)  # each pool its own batch, none of the default size
    db = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="db")
    for _ in range(2):
        db.submit(STOP.wait)
    time.sleep(0.3)
    for workers in (2, 1):
        threading.Thread(target=loop_with_executor, args=(workers,), daemon=True).start()
        time.sleep(0.3)


KEEP = []


def burst_here():
    big = [bytes(1000 + (i & 7)) for i in range(60 * 1024)]
    KEEP.append(bytes(2000))  # above the freed block: the heap's top cannot shrink past it
    del big


def burst():
    signal.signal(signal.SIGUSR1, lambda *_: LIBC.malloc_trim(0))
    burst_here()
    t = threading.Thread(target=burst_here)
    t.start()
    t.join()


def prefork(n):
    for k in range(n):
        if os.fork() == 0:
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            set_os_name(b"worker-%d" % k)
            while True:
                time.sleep(60)
    time.sleep(0.3)


def main():
    mode = sys.argv[1]
    if mode == "hostile":
        hostile()
    elif mode == "pools":
        pools()
    elif mode == "burst":
        burst()
    elif mode == "prefork":
        prefork(int(sys.argv[2]))
    time.sleep(0.3)
    print(f"inspect_target ready pid={os.getpid()}", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
