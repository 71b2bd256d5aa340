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
