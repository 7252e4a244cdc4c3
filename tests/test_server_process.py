"""ServerProcess on real processes: ready, fail fast on exit, stop the whole group."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.core.errors import LaunchError
from sweep.launch import processes
from sweep.launch.server import ServerProcess, free_port, reason_from_log

# A server that forks a child which ignores TERM, so only a group KILL ends both.
STUBBORN = """
import os, signal, sys, time, http.server, threading
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True: time.sleep(1)
open(sys.argv[2], "w").write(str(child))
signal.signal(signal.SIGTERM, signal.SIG_IGN)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.server
def test_ready_then_group_stop_kills_children_that_ignore_term(tmp_path: Path) -> None:
    port = free_port()
    child_file = tmp_path / "child.pid"
    argv = [sys.executable, "-c", STUBBORN, str(port), str(child_file)]
    with ServerProcess(argv, tmp_path / "server.log", os.environ) as server:
        waited = server.wait_ready(f"http://127.0.0.1:{port}/", timeout_s=20)
        assert waited < 20
        assert server.pid is not None and os.getpgid(server.pid) == server.pid  # its own session and group
        child = int(child_file.read_text())
        assert os.getpgid(child) == server.pid
        server.stop(grace_s=1.0)  # returns once KILL has followed the ignored TERM
    assert not _alive(server.pid)
    assert not _alive(child)


# A server whose worker leaves the process group (a new session), as a daemonising server's does.
DEPARTING = """
import os, sys, time, http.server
child = os.fork()
if child == 0:
    os.setsid()
    while True: time.sleep(1)
open(sys.argv[2], "w").write(str(child))
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


@pytest.mark.server
def test_a_worker_that_leaves_the_group_is_still_the_launchs_for_its_gpu_memory_and_its_stop(
    tmp_path: Path,
) -> None:
    """One definition of a launch's processes: its group and whatever carries its marker. The GPU watch once
    took the process group alone, so a worker in its own session was stopped but its memory not counted."""
    port = free_port()
    child_file = tmp_path / "child.pid"
    argv = [sys.executable, "-c", DEPARTING, str(port), str(child_file)]
    with ServerProcess(argv, tmp_path / "server.log", os.environ) as server:
        server.wait_ready(f"http://127.0.0.1:{port}/", timeout_s=20)
        child = int(child_file.read_text())
        for _ in range(100):  # the fork writes its pid before the child's setsid has run
            if os.getpgid(child) != server.pid:
                break
            time.sleep(0.05)
        assert os.getpgid(child) == child != server.pid
        assert server.pids() == {server.pid, child}
        server.stop(grace_s=1.0)
    assert not _alive(child)


# A server that daemonises: a double fork and a new session, its heir the only process left.
DAEMONISING = """
import os, time
time.sleep(0.1)
if os.fork() > 0:
    os._exit(0)
os.setsid()
if os.fork() > 0:
    os._exit(0)
time.sleep(30)
"""


@pytest.mark.server
def test_a_daemonising_launch_is_never_seen_gone_while_its_heir_lives(tmp_path: Path) -> None:
    """Scanned without pause through its double fork, a launch is never reported without processes while its
    heir lives. One scan lists /proc before it reads each process: the fork's parent, listed alive, has exited
    by its read and its heir was not listed, so one scan once saw none (CI: a daemonised server left running)."""
    argv = [sys.executable, "-c", DAEMONISING]
    for attempt in range(4):
        server = ServerProcess(argv, tmp_path / f"server{attempt}.log", os.environ)
        server.start()
        try:
            scans = []
            deadline = time.monotonic() + 0.6
            while time.monotonic() < deadline:
                scans.append(bool(server.pids()))
            heirs = server.pids()
            assert server.returncode == 0 and len(heirs) == 1 and server.pid not in heirs  # it did daemonise
            assert all(scans[scans.index(True) :]), f"attempt {attempt}: seen gone while its heir lived"
        finally:
            server.stop(grace_s=1.0)
        assert not server.pids()


@pytest.mark.server
def test_exit_during_start_fails_fast_with_the_reason(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('fatal: no such model', file=sys.stderr); sys.exit(3)"]
    server = ServerProcess(
        argv, tmp_path / "server.log", os.environ, exit_reason=lambda log, rc: f"rc={rc}: {log.strip()}"
    )
    started = time.monotonic()
    with server, pytest.raises(LaunchError, match="rc=3: fatal: no such model"):
        server.wait_ready(f"http://127.0.0.1:{free_port()}/health", timeout_s=60)
    assert time.monotonic() - started < 10
    assert "fatal: no such model" in (tmp_path / "server.log").read_text()


@pytest.mark.server
def test_a_server_whose_traceback_is_followed_by_shutdown_lines_is_named_by_its_exception(
    tmp_path: Path,
) -> None:
    """A real Python traceback (a worker's assertion), then the lines a parent prints as it tears down: the reason
    is the exception the last traceback ends on; without a traceback, the last line."""
    crash = (
        "import sys, traceback\n"
        "try:\n    assert False, 'buffer holds 32 rows but caller needs 64'\n"
        "except AssertionError:\n    traceback.print_exc()\n"
        "print('Received sigquit from a child process.'); print('kill_process_tree called: pid=1'); sys.exit(1)"
    )
    log = subprocess.run([sys.executable, "-c", crash], capture_output=True, text=True).stderr
    log += "Received sigquit from a child process.\nkill_process_tree called: pid=1\n"
    said = reason_from_log(log, -9, (), "the server")
    assert (
        said
        == "the server exited with code -9; it raised AssertionError: buffer holds 32 rows but caller needs 64"
    )
    plain = reason_from_log("loading\nError loading the model weights\nbye\n", 1, (), "the server")
    assert plain == "the server exited with code 1; last log line: bye"


@pytest.mark.server
def test_missing_binary_is_a_launch_error(tmp_path: Path) -> None:
    with (
        ServerProcess(["/nonexistent/llama-server"], tmp_path / "s.log", os.environ) as server,
        pytest.raises(LaunchError, match="cannot start /nonexistent/llama-server"),
    ):
        server.wait_ready(f"http://127.0.0.1:{free_port()}/health", timeout_s=30)


@pytest.mark.server
def test_not_ready_in_time(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    with (
        ServerProcess(argv, tmp_path / "s.log", os.environ) as server,
        pytest.raises(LaunchError, match="not ready after"),
    ):
        server.wait_ready(f"http://127.0.0.1:{free_port()}/health", timeout_s=1)
    assert server.pid is not None and not _alive(server.pid)


@pytest.mark.server
def test_server_does_not_outlive_a_killed_sweep(tmp_path: Path) -> None:
    """Even a SIGKILLed specsweep leaves no server behind (the server gets SIGTERM when its parent dies)."""
    port = free_port()
    script = f"""
import os, sys, time
from pathlib import Path
from sweep.launch.server import ServerProcess
server = ServerProcess([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}"], Path(r"{tmp_path}") / "s.log", os.environ)
server.start()
server.wait_ready("http://127.0.0.1:{port}/", timeout_s=20)
Path(r"{tmp_path}/pid").write_text(str(server.pid))
time.sleep(60)
"""
    sweep = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    server_pid = int((tmp_path / "pid").read_text())
    assert _alive(server_pid)
    sweep.kill()
    sweep.wait()
    deadline = time.monotonic() + 10
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(server_pid)


@pytest.mark.server
def test_an_impostor_on_the_port_is_not_taken_for_the_server(tmp_path: Path) -> None:
    """Something else answers 200 on the port (it took the port between trials): the launched process, which
    never listens there, is not ready, and the launch fails naming the holder."""
    port = free_port()
    impostor = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not processes.listening_inodes(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        argv = [sys.executable, "-c", "import time; time.sleep(60)"]
        with (
            ServerProcess(argv, tmp_path / "s.log", os.environ) as server,
            pytest.raises(
                LaunchError,
                match=f"port {port} answers, but it is held by another process \\(pid {impostor.pid}",
            ),
        ):
            server.wait_ready(f"http://127.0.0.1:{port}/", timeout_s=20)
        assert server.pid is not None and not _alive(server.pid)
    finally:
        impostor.kill()
        impostor.wait()


@pytest.mark.server
def test_the_log_keeps_every_byte_and_long_lines(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.buffer.write(b'a\\xff\\xfeb\\n' + b'y' * 300000 + b'\\nend\\n')"
    with ServerProcess([sys.executable, "-c", script], tmp_path / "s.log", os.environ) as server:
        deadline = time.monotonic() + 20
        while server.returncode is None and time.monotonic() < deadline:
            time.sleep(0.05)
    assert (tmp_path / "s.log").read_bytes() == b"a\xff\xfeb\n" + b"y" * 300000 + b"\nend\n"
    assert server.log_text().endswith("\nend\n") and "a\ufffd\ufffdb" in server.log_text()
    assert server.exited_early == 0  # it ended on its own, before stop(): what a trial treats as a failure
