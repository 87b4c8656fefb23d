"""Fork children while threads write to a disk cache; print how each child ended.

``python fork_stress.py <ForkSafeCache|Cache> <n forks>`` prints ``{exit code: count}``:
0 = the child wrote its entry, 3 = diskcache.Timeout, sig14 = hung until its 8 s alarm.
Used by tests/test_trust_boundary.py; with plain ``Cache`` it shows the failure it guards.
"""

import os
import signal
import sys
import tempfile
import threading
import time

import diskcache

from dashboard.store import ForkSafeCache

kind, n_forks = sys.argv[1], int(sys.argv[2])
cache = (ForkSafeCache if kind == "ForkSafeCache" else diskcache.Cache)(tempfile.mkdtemp(), timeout=3)
stop = False


def hammer(i):
    n = 0
    while not stop:
        cache.set(f"t{i}-{n % 50}", b"x" * 2000)
        cache.get(f"t{i}-{(n * 7) % 50}")
        n += 1


for i in range(4):
    threading.Thread(target=hammer, args=(i,), daemon=True).start()
time.sleep(0.2)
codes: dict = {}
for r in range(n_forks):
    pid = os.fork()
    if pid == 0:
        signal.alarm(8)
        try:
            cache.set(f"child{r}", b"y" * 100)
            os._exit(0)
        except diskcache.Timeout:
            os._exit(3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    key = os.WEXITSTATUS(status) if os.WIFEXITED(status) else f"sig{os.WTERMSIG(status)}"
    codes[key] = codes.get(key, 0) + 1
stop = True
print(codes)
