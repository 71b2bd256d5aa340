"""Real processes for the fault tests and bench/bench_faults.py: a gunicorn server and Celery
workers on a given database and broker, started as subprocesses and stopped by their pid."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(*, database_url: str, broker_url: str, **extra: str) -> dict:
    # The trial design is kept: the suite runs its §8 scenarios under `baseline` (conftest).
    design = os.environ.get("CAUTERWEB_TRIAL_DESIGN")
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CAUTERWEB_")},
        **({"CAUTERWEB_TRIAL_DESIGN": design} if design else {}),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "DEBUG": "false",
        "CAUTERWEB_HTTPS": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CAUTERWEB_ROUND_SCHEDULE_S": "3600",
        **extra,
    }


def wait_until(predicate, *, timeout_s: float, what: str) -> None:
    """Other processes reach a state in their own time: poll, fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Server:
    """gunicorn serving the app; `url` once it answers."""

    def __init__(self, env: dict, *, workers: int = 1, threads: int = 4):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # stderr to a file, not a pipe: a pipe nobody reads until the end fills (64 KB of
        # warnings about lost connections) and then blocks the server's logging, and with it
        # the request being answered.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (open while the server runs; `stop` closes it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "cauterweb.wsgi", "--bind",
             f"127.0.0.1:{self.port}", "--workers", str(workers), "--threads", str(threads),
             "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self.log,
        )  # fmt: skip
        wait_until(self._answers, timeout_s=60, what="gunicorn to answer")

    def _logged(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {self._logged()[-2000:]}")
        try:
            return httpx.get(f"{self.url}/api/v1/openapi.json", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> str:
        """Stop it; what it wrote on stderr (tracebacks of unhandled errors land there)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        logged = self._logged()
        self.log.close()
        return logged


def start_blocking_worker(
    env: dict, marker: Path, name: str, harness: str = "blocking_replay"
) -> subprocess.Popen:
    """A worker whose harness touches `marker` and then hangs in its replay (to be killed)."""
    return start_worker(
        {**env, "CAUTERWEB_REPLAY_BACKEND": f"tests.faults.harness:{harness}",
         "FAULT_MARKER": str(marker)},
        name,
    )  # fmt: skip


def start_worker(env: dict, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "cauterweb", "worker", "--pool=solo",
         "--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"{name}@%h",
         "--loglevel=WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class PrivateRedis:
    """A redis-server of the test's own, on a free port from 6391 up, so a test may pause
    (SIGSTOP), resume and restart it without touching the shared one. Stopped by its pid."""

    def __init__(self, *, persistent_dir: str | None = None):
        self.port = next(p for p in range(6391, 6491) if _port_free(p))
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = persistent_dir
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        if self._dir:  # persistent: what a restart keeps (an append-only file)
            args += ["--dir", self._dir, "--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._answers, timeout_s=20, what="the private redis-server")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            self.proc.wait(timeout=15)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def broker_emptied(app, broker_url: str) -> None:
    """Nothing left for the next workers: the queue purged, and the messages that workers
    killed by earlier tests had taken and never acknowledged (kombu's `unacked`, which the
    broker hands out again after its visibility timeout) forgotten."""
    import redis

    app.control.purge()
    redis.Redis.from_url(broker_url).delete("unacked", "unacked_index")
