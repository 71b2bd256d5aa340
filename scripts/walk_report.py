"""Which of the project's modules a report's way through the system runs: `POST /api/v1/reports`,
then the dashboard's page of a rule the report read (`GET /rules/<id>/`).

    .venv/bin/python scripts/walk_report.py [--json] [--max N]

On a fresh SQLite database of its own (migrated in memory, nothing else touched), after one
warm-up pass of both requests (imports and first reads are start-up, not the walk), a profile
hook records every project file in which a function runs, request by request, and the calls
from one package into another. The round the report asks for stops at the broker: it is the
engine's work, not the report's way to the page. With `--max`, exits 1 when the two requests
together run more modules than that.
"""

import argparse
import json
import os
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VENV = ROOT / ".venv"
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def project_module(filename: str) -> str | None:
    """The file's path in the repository, or None for library and standard-library code."""
    path = Path(filename)
    if not path.is_absolute() or VENV in path.parents or ROOT not in path.parents:
        return None
    if path.suffix != ".py" or path.parts[len(ROOT.parts)] in ("scripts", "tests"):
        return None
    return str(path.relative_to(ROOT))


class Recorder:
    """sys.setprofile: the project modules in which a function is called, and the calls that
    go from one top-level package into another (the caller the nearest project frame)."""

    def __init__(self):
        self.modules: Counter = Counter()
        self.crossings: Counter = Counter()

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        module = project_module(frame.f_code.co_filename)
        if module is None:
            return
        self.modules[module] += 1
        caller = frame.f_back
        while caller is not None and project_module(caller.f_code.co_filename) is None:
            caller = caller.f_back
        if caller is not None:
            source = project_module(caller.f_code.co_filename).split("/")[0]
            target = module.split("/")[0]
            if source != target:
                self.crossings[f"{source} → {target}"] += 1

    def __enter__(self):
        sys.setprofile(self)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)


def setup() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "cauterweb.settings"
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "CAUTERWEB_REPLAY_BACKEND"):
        os.environ[name] = ""
    os.environ.setdefault("SECRET_KEY", "walk")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_test_environment

    setup_test_environment()
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    from replay.tasks import round_run_task

    round_run_task.delay = lambda **kwargs: None  # the broker's side: not the walk


def actors():
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from lifecycle.services.rules import rule_record_candidate
    from lifecycle.services.tokens import token_create
    from lifecycle.states import Actor

    rule, _ = rule_record_candidate(
        actor=Actor.agent("walk"),
        rule_id="C-WALK",
        trigger="when git push is rejected as non-fast-forward",
        directive="fetch and rebase before pushing again",
        metric="task_completion",
        signature=["action:git.push"],
    )
    key = token_create(name="walk-bot", role="agent", actor="walk").key
    user = User.objects.create_user("walker", password="walk-walk-walk")
    user.groups.add(Group.objects.get_or_create(name="viewers")[0])
    agent = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")
    viewer = Client(HTTP_HOST="localhost")
    viewer.force_login(user)
    return rule, agent, viewer


def walk_once(n: int, rule, agent, viewer) -> dict[str, Recorder]:
    body = {
        "session_id": f"walk-{n}",
        "at": (T0 + timedelta(minutes=n)).isoformat(),
        "notices": ["breach:task_completion"],
        "metrics": {"task_completion": 0.4},
        "rules_read": [rule.id],
    }
    recorders = {}
    with Recorder() as recorders["POST /api/v1/reports"]:
        posted = agent.post(
            "/api/v1/reports", json.dumps(body), content_type="application/json", secure=True
        )
    assert posted.status_code == 200, posted.content[:300]
    with Recorder() as recorders[f"GET /rules/{rule.id}/"]:
        page = viewer.get(f"/rules/{rule.id}/", secure=True)
    assert page.status_code == 200, page.content[:300]
    return recorders


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--max", type=int, default=None)
    args = parser.parse_args()
    setup()
    rule, agent, viewer = actors()
    walk_once(0, rule, agent, viewer)  # warm-up: imports, first reads
    recorders = walk_once(1, rule, agent, viewer)
    modules = sorted(set().union(*(r.modules for r in recorders.values())))
    crossings = Counter()
    for recorder in recorders.values():
        crossings.update(recorder.crossings)
    if args.json:
        out = {
            "modules": modules,
            "by_request": {k: sorted(r.modules) for k, r in recorders.items()},
            "crossings": dict(crossings),
        }
        print(json.dumps(out, indent=1))
    else:
        for request, recorder in recorders.items():
            print(f"{request}: {len(recorder.modules)} modules")
            for module in sorted(recorder.modules):
                print(f"  {module}")
        print(f"both: {len(modules)} modules; package crossings (caller → callee):")
        for edge, calls in sorted(crossings.items()):
            print(f"  {edge}  ({calls} calls)")
    return 1 if args.max is not None and len(modules) > args.max else 0


if __name__ == "__main__":
    sys.exit(main())
