"""Coding-agent log import: transcript lines per second on one core, and peak memory at two
sizes (docs/traces.md, "Coding-agent logs").

    python bench/bench_transcripts.py [--lines 50000,500000]        # temporary SQLite file
    DATABASE_URL=postgres://127.0.0.1/cw_bench python bench/bench_transcripts.py

It writes a month of Claude Code transcripts and Codex rollouts (sessions of 40 to 400 lines:
prompts, tool calls, outputs of a few hundred bytes to a few kilobytes, failures, recoveries,
secrets) into a temporary directory, then for each size runs `import_traces DIR` in a child
process (one Python process: one core) against a fresh database and prints its wall time, its
CPU time, the lines it read per second of each, and its peak RSS (ru_maxrss). `--read-only`
times the pure reading alone (detection, parsing, redaction, derivation; no database). The
machine's load average is printed beside every figure.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKEN = "ghp_" + "R2d7Kx9LmQ4pZt8VwN3bYc6FhJ1sGe5TaU0o"
OUTPUTS = [
    "To github.com:team/app.git\n ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs\nhint: Updates were rejected because the remote contains work that you do\nhint: not have locally.",
    "Successfully rebased and updated refs/heads/main.",
    "F.\nE   AssertionError: assert 2 == 3\nFAILED tests/test_x.py::test_y - AssertionError\n1 failed, 1 passed in 0.04s",
    "....\n4 passed in 0.31s",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nModuleNotFoundError: No module named 'jwt'",
]
COMMANDS = ["git push origin main", "git pull --rebase", "pytest -q", "pytest -q", "python app.py"]


def _claude_session(rng: random.Random, n: int, lines: int) -> list[str]:
    sid = f"{n:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
    base = {"sessionId": sid, "cwd": "/home/dev/app", "gitBranch": "main", "version": "2.0.30"}
    out = [
        json.dumps(
            {
                **base,
                "type": "user",
                "message": {
                    "role": "user",
                    "content": f"Task {n}: make the build pass; token {TOKEN}",
                },
            }
        )
    ]
    i = 0
    while len(out) < lines:
        k = rng.randrange(len(COMMANDS))
        tid = f"toolu_{n}_{i}"
        filler = "x" * rng.randrange(100, 3000)
        out.append(
            json.dumps(
                {
                    **base,
                    "type": "assistant",
                    "timestamp": "2025-11-03T09:00:00Z",
                    "message": {
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [
                            {"type": "text", "text": "Next step."},
                            {
                                "type": "tool_use",
                                "id": tid,
                                "name": "Bash",
                                "input": {"command": COMMANDS[k]},
                            },
                        ],
                    },
                }
            )
        )
        failed = k in (0, 2, 4)
        text = ("Exit code 1\n" if failed else "") + OUTPUTS[k] + "\n" + filler
        out.append(
            json.dumps(
                {
                    **base,
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tid,
                                "content": text,
                                "is_error": failed,
                            }
                        ],
                    },
                    "toolUseResult": {"stdout": text, "stderr": "", "interrupted": False},
                }
            )
        )
        i += 1
    return out


def write_corpus(root: Path, total_lines: int, seed: int = 7) -> int:
    """Claude Code sessions under root/claude/<project>/, each 40-400 lines, until the total."""
    rng = random.Random(seed)
    written, n = 0, 0
    folder = root / "claude" / "-home-dev-app"
    folder.mkdir(parents=True, exist_ok=True)
    while written < total_lines:
        lines = _claude_session(rng, n, min(rng.randrange(40, 400), total_lines - written + 1))
        (folder / f"{lines and json.loads(lines[0])['sessionId']}.jsonl").write_text(
            "\n".join(lines) + "\n"
        )
        written += len(lines)
        n += 1
    return written


def _child(database: str, directory: Path) -> dict:
    env = {**os.environ, "DATABASE_URL": database, "CELERY_BROKER_URL": ""}
    code = (
        "import django, time, resource, json, os, sys;"
        "django.setup();"
        "from django.core.management import call_command;"
        "call_command('migrate', verbosity=0);"
        "import io;"
        "w, c = time.perf_counter(), time.process_time();"
        f"call_command('import_traces', {str(directory)!r}, stdout=io.StringIO(), stderr=io.StringIO());"
        "print(json.dumps({'wall': time.perf_counter() - w, 'cpu': time.process_time() - c,"
        " 'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"
    )
    env.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fresh_database(base: str, tmp: Path, tag: str) -> str:
    """A database of its own for one size: a SQLite file, or `<the given database>_<size>`
    created afresh beside the one DATABASE_URL names (and dropped by `_drop`)."""
    if not base:
        return f"sqlite:///{tmp / f'bench-{tag}.sqlite3'}"
    root, name = base.rsplit("/", 1)
    _admin(root, f'DROP DATABASE IF EXISTS "{name}_{tag}"', f'CREATE DATABASE "{name}_{tag}"')
    return f"{root}/{name}_{tag}"


def _drop(url: str) -> None:
    if url.startswith("postgres"):
        root, name = url.rsplit("/", 1)
        _admin(root, f'DROP DATABASE IF EXISTS "{name}"')


def _admin(root: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(
        f"{root}/postgres".replace("postgres://", "postgresql://", 1), autocommit=True
    ) as conn:
        for statement in statements:
            conn.execute(statement)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def read_only(directory: Path) -> tuple[int, float]:
    from traces import logs

    start = time.process_time()
    sessions = sum(1 for _ in logs.read(directory))
    return sessions, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", default="50000,500000", help="sizes, comma-separated")
    parser.add_argument("--read-only", action="store_true", help="time the reading alone")
    args = parser.parse_args()
    sizes = [int(s) for s in args.lines.split(",")]
    base = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for size in sizes:
            folder = tmp / f"logs-{size}"
            lines = write_corpus(folder, size)
            megabytes = sum(p.stat().st_size for p in folder.rglob("*.jsonl")) / 1e6
            if args.read_only:
                sessions, cpu = read_only(folder)
                print(
                    f"{lines:>9,} lines ({megabytes:,.0f} MB, {sessions} sessions): read {cpu:.2f} s CPU, {lines / cpu:,.0f} lines/s (load {_load()})"
                )
                continue
            database = _fresh_database(base, tmp, str(size))
            try:
                figures = _child(database, folder)
            finally:
                _drop(database)
            print(
                f"{lines:>9,} lines ({megabytes:,.0f} MB): import {figures['wall']:.2f} s wall, "
                f"{figures['cpu']:.2f} s CPU — {lines / figures['wall']:,.0f} lines/s wall, "
                f"{lines / figures['cpu']:,.0f} lines/s CPU; peak RSS {figures['rss_mb']:.0f} MB "
                f"(load {_load()}; {'PostgreSQL' if base else 'SQLite'})"
            )


if __name__ == "__main__":
    main()
