"""A target process for inspect's tests: seed 002's thread leak, or its fix.

  asyncio_target.py leak N    N handlers, each in its own asyncio.run()
                              (nested in a worker thread), each firing
                              fire-and-forget to_thread() tasks that outlive
                              it: one full default executor per handler.
  asyncio_target.py capped N  the fix: asyncio.Runner with a 4-worker
                              default executor, the tasks awaited.
  asyncio_target.py once      one asyncio.run() with one to_thread() call.
  asyncio_target.py seed002 N the leak, after `import numpy` (OpenBLAS's
                              pool), each cleanup keeping 3 MiB of 2 KiB
                              objects (malloc'd in its thread's glibc arena):
                              seed 002's three findings in one process.

Prints "inspect_target ready pid=PID threads=T" once the threads are up,
then sleeps until killed.
"""
import asyncio
import concurrent.futures
import os
import sys
import threading
import time

STOP = threading.Event()


KEEP = []
KEEP_PER_TASK = 0


def slow_cleanup():
    # The S3 cleanup of seed 002: slower than the handler's shutdown. Its
    # buffers (over pymalloc's 512 bytes: glibc malloc, this thread's arena).
    if KEEP_PER_TASK:
        time.sleep(0.3)  # the request first; then the buffers
        KEEP.append([bytes(2048) for _ in range(KEEP_PER_TASK)])
    STOP.wait()


def quick_cleanup():
    time.sleep(0.05)


async def leaky_handler():
    await asyncio.sleep(0.2)  # the handler's own work, before it fires and forgets
    for _ in range(2 * ((os.cpu_count() or 1) + 4)):
        asyncio.create_task(asyncio.to_thread(slow_cleanup))
    # The tasks start and the executor fills up; the handler carries on a
    # while before it returns (and asyncio.run starts the executor's shutdown).
    # Timed so that no two of these land within the 50 ms batch window:
    # handler threads at 0, 1, 2 s; pools at +0.2 s; shutdowns at +0.7 s.
    await asyncio.sleep(0.5)
    return True


async def capped_handler():
    await asyncio.sleep(0.2)
    await asyncio.gather(*[asyncio.to_thread(quick_cleanup) for _ in range(16)])
    return True


def run_capped(coro):
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="capped"))
        return runner.run(coro)


def main():
    mode = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    if mode == "seed002":
        global KEEP_PER_TASK
        import numpy  # noqa: F401  OpenBLAS starts its pool here
        KEEP_PER_TASK = 1536
        mode = "leak"
    if mode == "leak":
        # Each handler runs asyncio.run() in a thread of its own; it never
        # returns (its executor's shutdown waits for the cleanups).
        for _ in range(n):
            threading.Thread(target=asyncio.run, args=(leaky_handler(),), daemon=True).start()
            time.sleep(1.0)  # handlers complete at different times, as in seed 002
    elif mode == "capped":
        for _ in range(n):
            run_capped(capped_handler())
            time.sleep(0.2)
    elif mode == "once":
        asyncio.run(asyncio.to_thread(quick_cleanup))
    else:
        sys.exit("usage: asyncio_target.py leak|capped|once [N]")
    if mode == "leak":
        time.sleep(1.0)  # the last handler returns: its shutdown thread starts
    print(f"inspect_target ready pid={os.getpid()} threads={threading.active_count()}", flush=True)
    while True:
        time.sleep(3600)


main()
