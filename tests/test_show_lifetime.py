"""Issue 46: ``dashboard.show``'s server ends with the process that started it, however that
process ends (a signal, a kernel shut down or restarted), unless asked to ``keep``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parent.parent

#: a caller of show(): prints the server's pid and port, then waits to be killed
CALLER = textwrap.dedent(
    """
    import sys, time, numpy as np, pandas as pd
    from sklearn.ensemble import RandomForestRegressor
    import dashboard
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"size": rng.normal(size=300), "rooms": rng.normal(size=300)})
    df["price"] = 2 * df["size"] + rng.normal(size=300)
    model = RandomForestRegressor(n_estimators=20, random_state=0).fit(df[["size", "rooms"]], df["price"])
    port = int(sys.argv[3]) if len(sys.argv) > 3 else None
    shown = dashboard.show(model, df, "price", cache_dir=sys.argv[1], keep=sys.argv[2] == "keep", port=port)
    print("SERVER", shown.server.process.pid, shown.server.port, flush=True)
    time.sleep(600)
    """
)


def _session(sid: int) -> list[int]:
    """Pids of the processes of session ``sid`` (the server started one of its own)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def _gone_within(sid: int, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _session(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _binds(port: int) -> bool:
    """Whether a server could listen on ``port`` now (as servers do, with SO_REUSEADDR: a
    connection of the ended server's in TIME_WAIT does not hold the port)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _binds_within(port: int, seconds: float) -> bool:
    """The port binds again within ``seconds`` (the issue's 5 s: a dying process's sockets
    are released as the kernel reaps it, a moment after it leaves the process table)."""
    deadline = time.monotonic() + seconds
    while not _binds(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _spawn(*args: str, stderr=None) -> subprocess.Popen:
    """A Python script of this test run, this checkout first on its path, its output read."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _said(process: subprocess.Popen, tag: str) -> list[str]:
    """The words after ``tag`` on the process's first line of output."""
    line = process.stdout.readline() if process.stdout else ""
    assert line.startswith(f"{tag} "), line
    return line.split()[1:]


def _start_caller(tmp_path: Path, keep: str = "no", stderr=None) -> tuple[subprocess.Popen, int, int]:
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    caller = _spawn(str(script), str(tmp_path / "cache"), keep, stderr=stderr)
    pid, port = map(int, _said(caller, "SERVER"))
    assert _session(pid) and not _binds(port)  # serving
    return caller, pid, port


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_server_ends_with_the_script_that_started_it(tmp_path, how):
    caller, server, port = _start_caller(tmp_path)
    caller.send_signal(how)  # atexit never runs
    caller.wait(timeout=10)
    left = _gone_within(server, 5.0)
    assert left == [], f"still running 5 s after the caller's {how.name}: {left}"
    assert _binds_within(port, 5.0), subprocess.run(["ss", "-tanp"], capture_output=True, text=True).stdout


def test_keep_lets_the_server_outlive_its_caller_and_says_how_to_stop_it(tmp_path):
    said = tmp_path / "stderr.txt"  # a file: the kept server holds the caller's stderr open
    caller, server, port = _start_caller(tmp_path, "keep", stderr=said.open("w"))
    try:
        caller.kill()
        caller.wait(timeout=10)
        message = said.read_text()
        assert f"kill -TERM -- -{server}" in message and "keeps running" in message
        time.sleep(3)
        assert server in _session(server) and not _binds(int(port))  # still serving
    finally:
        os.killpg(server, signal.SIGTERM)  # as the message says
    assert _gone_within(server, 10.0) == []


#: a stand-in for a server's session: a leader watching its parent with serve's own code, a
#: child that ignores SIGTERM and an orphaned grandchild (its parent already ended)
SESSION = textwrap.dedent(
    """
    import os, signal, sys, time
    from dashboard import serve
    parent = int(sys.argv[1])
    if os.fork() == 0:  # a child that ignores SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
    if os.fork() == 0:
        if os.fork() == 0:  # the grandchild, re-parented to init when its parent ends
            time.sleep(600)
        os._exit(0)
    print("READY", flush=True)
    serve._end_with(parent)
    """
)


#: the caller of that stand-in: starts it in a session of its own, as show() does
STARTER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    leader = subprocess.Popen([sys.executable, sys.argv[1], str(os.getpid())], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)
    assert leader.stdout.readline().strip() == "READY"
    print("LEADER", leader.pid, flush=True)
    time.sleep(600)
    """
)


def test_the_whole_session_ends_even_a_child_that_ignores_sigterm_or_lost_its_parent(tmp_path):
    (tmp_path / "session.py").write_text(SESSION)
    (tmp_path / "starter.py").write_text(STARTER)
    starter = _spawn(str(tmp_path / "starter.py"), str(tmp_path / "session.py"))
    (leader,) = map(int, _said(starter, "LEADER"))
    try:
        time.sleep(0.5)
        assert len(_session(leader)) == 3  # the leader, the child, the orphaned grandchild
        starter.kill()
        starter.wait(timeout=10)
        left = _gone_within(leader, 5.0)
        assert left == [], f"still running 5 s after the starter was killed: {left}"
    finally:
        try:
            os.killpg(leader, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _show_in(client, tmp_path: Path, port: int | None = None) -> tuple[int, int]:
    """Run show() in a kernel; the server's pid and port it reports."""
    said: list[str] = []

    def keep(message):
        if message["msg_type"] == "stream":
            said.append(message["content"]["text"])
        elif message["msg_type"] == "error":
            said.append("\n".join(message["content"]["traceback"]))

    code = CALLER.replace("sys.argv[1]", repr(str(tmp_path / "cache"))).replace('sys.argv[2] == "keep"', "False")
    code = code.replace("int(sys.argv[3]) if len(sys.argv) > 3 else None", repr(port)).replace("time.sleep(600)", "")
    client.execute_interactive(code, output_hook=keep, timeout=300)
    line = next((s for s in "".join(said).splitlines() if s.startswith("SERVER ")), "")
    assert line, said
    _, pid, given = line.split()
    return int(pid), int(given)


def test_a_kernel_killed_or_restarted_takes_its_server_along_and_the_next_finds_the_port_free(tmp_path):
    """A real Jupyter kernel: restarted at once (SIGKILL, as a hung kernel is), restarted
    politely, and shut down at once; each time its server ends within 5 s, and the new
    kernel's show() on the same port finds no stale server there."""
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(ROOT))
    try:
        server, port = _show_in(client, tmp_path)
        for end in ("restart now", "restart politely", "shut down now"):
            if end == "shut down now":
                manager.shutdown_kernel(now=True)
            else:
                manager.restart_kernel(now=end == "restart now")
            left = _gone_within(server, 5.0)
            assert left == [], f"{end}: the server's session still runs 5 s later: {left}"
            sockets = lambda: subprocess.run(["ss", "-tanp"], capture_output=True, text=True).stdout
            assert _binds_within(port, 5.0), (end, sockets())
            if end != "shut down now":
                client.wait_for_ready(timeout=60)
                server, again = _show_in(client, tmp_path, port=port)
                assert again == port
    finally:
        client.stop_channels()
        if manager.is_alive():
            manager.shutdown_kernel(now=True)
