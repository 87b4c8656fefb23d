"""Issue 40, item 1: every process ends with its server and none holds a socket it does not
serve.

``python app.py`` and ``gunicorn -c gunicorn.conf.py app:server`` are started in a session of
their own; a page's what-if starts a warm model process and its background job a job process
(and that job its isolated model process); then the server gets SIGTERM, SIGINT or SIGKILL.
Within 5 s no process of its session may be left and the port must bind again (with
SO_REUSEADDR, as a server binds: only a socket still listening holds it). Children stuck
after the fork were seen about half the time, so the SIGTERM case runs more than once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests
from helpers.ports import free_port

from dashboard import ids
from dashboard.state import default_state
from dashboard.warm import PROCESS_NAME

ROOT = Path(__file__).resolve().parent.parent
GRACE = 5.0  # the limit: every descendant gone, the port free


def _session(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid`` (the server's: it started one of its own; a
    child re-parented to init keeps it)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == sid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def _described(processes: list[psutil.Process]) -> list[str]:
    out = []
    for process in processes:
        try:
            out.append(f"{process.pid} (parent {process.ppid()}, {process.name()}, {process.status()})")
        except psutil.Error:
            pass
    return out


def _gone_within(sid: int, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := _session(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _described(left)


def _binds(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _listeners(port: int) -> list[int]:
    """Pids with a socket listening on ``port``."""
    found = []
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            found.append(conn.pid)
    return found


class Server:
    """A server of this checkout in a session of its own, its cache folder given."""

    def __init__(self, kind: str, cache: Path):
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if kind == "app.py":
            args = [sys.executable, "app.py", "--port", str(self.port), "--cache-dir", str(cache)]
        else:  # production, configured from the environment
            args = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--no-control-socket", "app:server"]
            env |= {"WIP_PORT": str(self.port), "WIP_CACHE_DIR": str(cache)}
        self.log = open(cache.parent / f"{kind}-{self.port}.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 90
        while True:
            assert self.process.poll() is None, self.output()
            try:
                if requests.get(self.url + "/", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "the server did not answer in 90 s:\n" + self.output()
            time.sleep(0.2)

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()[-3000:]

    def callback(self, output: str, inputs: list[dict], changed: str) -> dict:
        body = {"output": output, "outputs": _outputs(output), "inputs": inputs, "changedPropIds": [changed]}
        answer = requests.post(
            self.url + "/_dash-update-component",
            data=json.dumps(body),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert answer.status_code == 200, (answer.status_code, answer.text[:500])
        return answer.json()

    def what_if_and_job(self, repeats: int, value: float) -> None:
        """What a page does on a what-if edit: ``resolve`` (the what-if computed in a warm
        model process), then the background job for the rest (a job process, and its model
        process)."""
        state = {**default_state(), "ws": "demo-x3", "obs": "5", "edit": {"X2": value}, "repeats": repeats}
        resolved = self.callback(
            _RESOLVE,
            [
                {"id": ids.STATE, "property": "data", "value": state},
                {"id": ids.RETRY, "property": "n_clicks", "value": None},
            ],
            f"{ids.STATE}.data",
        )
        request = resolved["response"][ids.JOB_REQUEST]["data"]
        assert isinstance(request, dict), resolved  # a new `repeats`: PFI to compute
        started = self.callback(
            f"{ids.JOB_DONE}.data",
            [{"id": ids.JOB_REQUEST, "property": "data", "value": request}],
            f"{ids.JOB_REQUEST}.data",
        )
        assert started.get("job"), started  # Dash's handle of the job's process

    def wait_for_children(self) -> list[psutil.Process]:
        """The session once a warm process and a job's model process (a grandchild of a
        worker) run."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = _session(self.process.pid)
            names = {p.pid: _name(p) for p in found}
            depth = {p.pid: _depth(p, self.process.pid) for p in found}
            warm = [p for p in found if names[p.pid] == PROCESS_NAME]
            deep = [p for p in found if depth[p.pid] >= 3 and names[p.pid] != PROCESS_NAME]
            if warm and deep:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no warm and job process: {_described(_session(self.process.pid))}\n{self.output()}")

    def stop(self, sig: int) -> tuple[list[str], bool, list[int]]:
        """Send ``sig`` to the server (its first process); what is left of its session after
        5 s, whether the port binds, and who still listens on it."""
        os.kill(self.process.pid, sig)
        left = _gone_within(self.process.pid, GRACE)
        binds = _binds(self.port)
        listening = _listeners(self.port)
        return left, binds, listening

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for process in _session(self.process.pid):
            try:
                process.kill()
            except psutil.Error:
                pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()


def _name(process: psutil.Process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return ""


def _depth(process: psutil.Process, root: int) -> int:
    """How many parents up ``root`` is (0: the root itself; 99: not under it any more)."""
    depth, current = 0, process
    try:
        while current is not None and current.pid != root:
            current = current.parent()
            depth += 1
    except psutil.Error:
        return 99
    return depth if current is not None else 99


def _outputs(output: str) -> list[dict] | dict:
    """Dash's ``outputs`` for an ``output`` string (``..a.p...b.q..`` for several)."""
    if output.startswith(".."):
        parts = output.strip(".").split("...")
        return [{"id": part.rsplit(".", 1)[0], "property": part.rsplit(".", 1)[1]} for part in parts]
    name, prop = output.rsplit(".", 1)
    return {"id": name, "property": prop}


# the resolve callback (dashboard/callbacks/compute.py): outputs in the order registered
_RESOLVE = f"..{ids.RESULTS}.data...{ids.JOB_REQUEST}.data...{ids.STATUS}.children...{ids.RETRY}.style.."


def _run(kind: str, folder: Path, sig: int, repeats: int) -> tuple[list[str], bool, list[int], str]:
    """One server with an empty cache folder (its job computes the whole demo: it is still
    running when the signal comes)."""
    cache = folder / f"{kind}-{repeats}" / "cache"
    cache.mkdir(parents=True)
    started = time.monotonic()
    server = Server(kind, cache)
    try:
        server.what_if_and_job(repeats, 0.5 + repeats / 100)
        before = server.wait_for_children()
        assert len(before) >= 5, _described(before)  # master, 2 workers, a warm process, a job
        left, binds, listening = server.stop(sig)
        output = server.output()
    finally:
        server.close()
    print(f"{kind} {signal.Signals(sig).name}: {len(before)} processes, {time.monotonic() - started:.1f} s")
    return left, binds, listening, output


@pytest.mark.parametrize("kind", ["app.py", "gunicorn"])
def test_sigterm_with_a_job_and_a_warm_process_running_leaves_nothing(tmp_path, kind):
    left, binds, listening, output = _run(kind, tmp_path, signal.SIGTERM, 11)
    assert not left, f"left after {GRACE} s: {left}\n{output}"
    assert not listening and binds, (listening, output)


@pytest.mark.parametrize("kind", ["app.py", "gunicorn"])
def test_sigkill_of_the_server_takes_every_descendant_along(tmp_path, kind):
    left, binds, listening, output = _run(kind, tmp_path, signal.SIGKILL, 12)
    assert not left, f"left after {GRACE} s: {left}\n{output}"
    assert not listening and binds, (listening, output)


def test_sigint_to_python_app_py_leaves_nothing(tmp_path):
    left, binds, listening, output = _run("app.py", tmp_path, signal.SIGINT, 13)
    assert not left, f"left after {GRACE} s: {left}\n{output}"
    assert not listening and binds, (listening, output)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["app.py", "gunicorn"])
def test_sigterm_again_and_again(tmp_path, kind):
    """The race was seen about half the time: three more runs each (four with the quick test)."""
    for repeats in range(20, 23):
        left, binds, listening, output = _run(kind, tmp_path, signal.SIGTERM, repeats)
        assert not left, f"run {repeats - 19}: left after {GRACE} s: {left}\n{output}"
        assert not listening and binds, (repeats, listening, output)


def test_a_child_closes_the_servers_sockets_and_keeps_its_own_connections():
    """The server's listening sockets and the connections accepted on their ports are closed
    in a forked child; an outgoing connection (a Celery worker's Redis connection, which a
    job reports its progress through) stays usable: closing it made every job fail there."""
    import socket as socketlib

    from dashboard.isolation import close_inherited_sockets

    server = socketlib.create_server(("127.0.0.1", 0))
    client = socketlib.create_connection(server.getsockname())
    accepted, _ = server.accept()
    other = socketlib.create_server(("127.0.0.1", 0))  # another service, e.g. Redis
    outgoing = socketlib.create_connection(other.getsockname())
    fds = {"server": server.fileno(), "accepted": accepted.fileno(), "outgoing": outgoing.fileno()}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: which are still open after the close
        close_inherited_sockets()
        still = [name for name, fd in fds.items() if _open(fd)]
        os.write(write, ",".join(still).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    still = os.read(read, 1000).decode().split(",")
    os.close(read)
    for sock in (server, client, accepted, other, outgoing):
        sock.close()
    assert still == ["outgoing"], still


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
