"""Write the demo corpus and candidates (lifecycle/fixtures/demo/): deterministic, committed.

    .venv/bin/python bench/make_demo_corpus.py

Eight failure families of agent sessions, with successes and near misses beside them. Every
step is a tool call (input, output, error) carrying the atoms of the state it left; every
replayable case has a `replay_input` in the format of the simulated harness
(replay.backends.simulated): the fault state of a failing case and the fixes that rescue it
when a rule with the right directive is read there, the hazard states of a win where a bad
directive harms it.

The F-001 situation of semantics §11 is here exactly: eight non-fast-forward push failures, five of
which quote git's "(non-fast-forward)" line (the other three get git's "(fetch first)"
wording), and three successful or recovered git sessions whose prose shares enough words with
"when git push fails with non-fast-forward" for the legacy lexical gate to fire: S-022 (a git
pull that prints "Fast-forward"), S-023 (a git status "can be fast-forwarded") and NM-044 (a
commit hook that fails before the push). tests/test_gate.py pins the numbers.
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "lifecycle" / "fixtures" / "demo"
EPOCH = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

# Small fixed offsets so metrics differ between cases without a random generator.
JITTER = [0.0, 0.03, -0.02, 0.05, -0.04, 0.01, -0.01, 0.04, -0.03, 0.02]


def _clip(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 2)


def metrics(kind: str, n: int) -> dict:
    """Tier 0–3 metrics of a case; failures are low on the outcome-side metrics."""
    j = JITTER[n % len(JITTER)]
    base = {
        "failure": {
            "outcome_correct": 0.0,
            "task_completion": 0.3,
            "coherence": 0.72,
            "tool_correctness": 0.5,
            "argument_correctness": 0.6,
            "plan_adherence": 0.55,
            "plan_quality": 0.6,
            "step_efficiency": 0.45,
        },
        "success": {
            "outcome_correct": 1.0,
            "task_completion": 0.93,
            "coherence": 0.86,
            "tool_correctness": 0.92,
            "argument_correctness": 0.9,
            "plan_adherence": 0.85,
            "plan_quality": 0.82,
            "step_efficiency": 0.8,
        },
        "near_miss": {
            "outcome_correct": 1.0,
            "task_completion": 0.8,
            "coherence": 0.78,
            "tool_correctness": 0.7,
            "argument_correctness": 0.75,
            "plan_adherence": 0.7,
            "plan_quality": 0.68,
            "step_efficiency": 0.55,
        },
    }[kind]
    return {
        name: value if name == "outcome_correct" else _clip(value + j)
        for name, value in base.items()
    }


RESCUED = {
    "outcome_correct": 1.0,
    "task_completion": 0.92,
    "coherence": 0.84,
    "tool_correctness": 0.9,
    "argument_correctness": 0.88,
}
HARMED = {
    "outcome_correct": 0.0,
    "task_completion": 0.15,
    "coherence": 0.7,
    "tool_correctness": 0.35,
    "argument_correctness": 0.4,
}
# A force push gets the failing push through (task "done") but destroys a teammate's commits.
PUSHED_THROUGH = {
    "outcome_correct": 0.0,
    "task_completion": 0.85,
    "coherence": 0.75,
    "tool_correctness": 0.7,
    "argument_correctness": 0.6,
}


def step(tool: str, input: str, output: str = "", *, error: str = "", atoms=()) -> dict:
    return {"tool": tool, "input": input, "output": output, "error": error, "atoms": list(atoms)}


def fix(terms, metrics, effect="rescue") -> dict:
    return {"directive_terms": list(terms), "effect": effect, "metrics": dict(metrics)}


class Family:
    """One failure family: its scope, failure-mode atoms and the fixes a right (or wrong)
    directive has on its failing cases."""

    def __init__(self, *, name, scope, tool, action, error, fixes, notices=None):
        self.name = name
        self.scope = scope
        self.atoms = [f"tool:{tool}", f"action:{action}", f"error:{error}"]
        self.fixes = fixes
        self.notices = notices or ["breach:task_completion", "breach:outcome_correct"]


LINES: list[dict] = []


def _when(n_days: float) -> str:
    return (EPOCH + timedelta(days=n_days)).isoformat().replace("+00:00", "Z")


def failure(
    fam: Family,
    tid: str,
    task: str,
    steps: list[dict],
    *,
    day: float,
    expected=None,
    replayable=True,
    extra_notices=(),
):
    fault_step = next(i for i, s in enumerate(steps) if s["error"])
    n = int(tid.split("-")[1])
    line = {
        "id": tid,
        "kind": "failure",
        "task": task,
        "steps": steps,
        "outcome": {"status": "failed", "summary": steps[fault_step]["error"]},
        "metrics": metrics("failure", n),
        "signature": fam.atoms,
        "notices": [*fam.notices, *extra_notices],
        "session_id": f"sess-{tid.lower()}",
        "started_at": _when(day),
        "corpus": "failures/positive",
        "meta": {"family": fam.name, "scope": fam.scope},
    }
    if expected:
        line["expected_rule"] = {"trigger": expected[0], "directive": expected[1]}
    if replayable:
        line["replay_input"] = {
            "task": task,
            "scope": fam.scope,
            "fault": {"step": fault_step, "atoms": steps[fault_step]["atoms"]},
            "fixes": fam.fixes,
            "hazards": [],
        }
    else:
        line["replayable"] = False
        line["meta"]["why_not_replayable"] = "recorded in production; the cluster cannot be re-run"
    LINES.append(line)


def win(
    tid: str,
    kind: str,
    task: str,
    steps: list[dict],
    *,
    scope: str,
    family: str,
    signature: list[str],
    day: float,
    hazards=(),
    notices=(),
):
    n = int(tid.split("-")[1])
    LINES.append(
        {
            "id": tid,
            "kind": kind,
            "task": task,
            "steps": steps,
            "outcome": {"status": "succeeded" if kind == "success" else "recovered"},
            "metrics": metrics(kind, n),
            "signature": signature,
            "notices": list(notices),
            "session_id": f"sess-{tid.lower()}",
            "started_at": _when(day),
            "corpus": "reference-expansion" if kind == "success" else "near-misses",
            "meta": {"family": family, "scope": scope},
            "replay_input": {
                "task": task,
                "scope": scope,
                "fault": None,
                "fixes": [],
                "hazards": [
                    {"atoms": h[0], "directive_terms": h[1], "metrics": h[2]} for h in hazards
                ],
            },
        }
    )


# --- A. git push rejected as non-fast-forward (scope git) ---------------------------------
GIT = Family(
    name="git-push-non-fast-forward",
    scope="git",
    tool="git",
    action="git.push",
    error="non_fast_forward",
    fixes=[
        fix(["force"], PUSHED_THROUGH, effect="harm"),
        fix(["pull"], RESCUED),
        fix(["rebase"], RESCUED),
        fix(["fetch"], RESCUED),
    ],
)
PUSH_ATOMS = ["tool:git", "action:git.push"]
NFF = [*PUSH_ATOMS, "error:non_fast_forward"]


def rejected_push(branch: str, remote: str, *, wording: str) -> dict:
    """git's two wordings of the same rejection: '(non-fast-forward)' when the branch is behind,
    '(fetch first)' when the remote has work the local repository has never seen."""
    if wording == "non-fast-forward":
        out = (
            f"To {remote}\n ! [rejected]        {branch} -> {branch} (non-fast-forward)\n"
            f"error: failed to push some refs to '{remote}'\n"
            "hint: Updates were rejected because the tip of your current branch is behind\n"
            "hint: its remote counterpart."
        )
    else:
        out = (
            f"To {remote}\n ! [rejected]        {branch} -> {branch} (fetch first)\n"
            f"error: failed to push some refs to '{remote}'\n"
            "hint: Updates were rejected because the remote contains work that you do\n"
            "hint: not have locally."
        )
    return step(
        "git", f"git push origin {branch}", out, error=out.splitlines()[1].strip(), atoms=NFF
    )


def commit(msg: str) -> dict:
    return step(
        "git",
        f'git commit -am "{msg}"',
        f"[main 4e1c2a7] {msg}\n 2 files changed, 14 insertions(+), 3 deletions(-)",
        atoms=["tool:git", "action:git.commit"],
    )


GIT_REMOTE = "git@github.com:acme/payments-api.git"
git_failures = [
    (
        "F-001",
        "Commit the currency rounding fix and publish it to main",
        "main",
        "non-fast-forward",
        ("when git push fails with non-fast-forward", "pull latest changes before pushing"),
    ),
    (
        "F-002",
        "Ship the retry-budget config change to the release branch",
        "release/2.4",
        "non-fast-forward",
        (
            "when the remote rejects a push because the branch is behind",
            "fetch and rebase onto the remote branch, then push again",
        ),
    ),
    (
        "F-003",
        "Publish the updated OpenAPI schema",
        "main",
        "non-fast-forward",
        (
            "if pushing to origin is refused as non-fast-forward",
            "integrate the upstream commits with git pull --rebase before pushing",
        ),
    ),
    (
        "F-004",
        "Upload the hotfix for the webhook signature check",
        "hotfix/webhook-sig",
        "fetch first",
        (
            "when a push is rejected because the remote contains work you do not have",
            "pull the remote changes and resolve conflicts before pushing",
        ),
    ),
    ("F-005", "Push the dependency bump for urllib3", "main", "non-fast-forward", None),
    ("F-006", "Sync the docs branch with the new changelog", "docs", "fetch first", None),
    ("F-007", "Push the lint configuration to the shared branch", "dev", "non-fast-forward", None),
    ("F-008", "Deliver the feature flag cleanup to origin", "main", "fetch first", None),
]
for i, (tid, task, branch, wording, expected) in enumerate(git_failures):
    failure(
        GIT,
        tid,
        task,
        [
            step("git", "git status --short", " M src/payments/rounding.py", atoms=["tool:git"]),
            commit(task.split(" to ")[0].lower()),
            rejected_push(branch, GIT_REMOTE, wording=wording),
            step(
                "shell",
                "echo 'giving up: remote rejected the update'",
                "giving up: remote rejected the update",
                atoms=["tool:shell"],
            ),
        ],
        day=1 + i * 3,
        expected=expected,
    )

# Successes and near misses around git. S-022 and S-023 share words with the F-001 trigger
# ("git", "fast", "forward", "push", "fails") without being a failed push; the signature gate must not count them.
win(
    "S-022",
    "success",
    "Update the local main branch with the team's latest commits",
    [
        step(
            "git",
            "git pull --ff-only origin main",
            "Updating 9c1d2e3..a4b5c6d\nFast-forward\n src/payments/fees.py | 6 +++---\n"
            " 1 file changed, 3 insertions(+), 3 deletions(-)",
            atoms=["tool:git", "action:git.pull"],
        ),
    ],
    scope="git",
    family="git-sync",
    signature=["tool:git", "action:git.pull"],
    day=4.5,
)
win(
    "S-023",
    "success",
    "Check that main is clean and ready to push before the release",
    [
        step(
            "git",
            "git status",
            "On branch main\nYour branch is behind 'origin/main' by 2 commits, and can be "
            'fast-forwarded.\n  (use "git pull" to update your local branch)\n\n'
            "nothing to commit, working tree clean",
            atoms=["tool:git", "action:git.status"],
        ),
    ],
    scope="git",
    family="git-sync",
    signature=["tool:git", "action:git.status"],
    day=7.5,
)
win(
    "S-024",
    "success",
    "Publish the settlement report fix to main",
    [
        commit("fix settlement report totals"),
        rejected_push("main", GIT_REMOTE, wording="fetch first"),
        step(
            "git",
            "git pull --rebase origin main",
            "Successfully rebased and updated refs/heads/main.",
            atoms=["tool:git", "action:git.pull"],
        ),
        step(
            "git",
            "git push origin main",
            f"To {GIT_REMOTE}\n   a4b5c6d..e7f8091  main -> main",
            atoms=PUSH_ATOMS,
        ),
    ],
    scope="git",
    family="git-push-non-fast-forward",
    # The session succeeded: its signature is what it did, not the error it recovered from.
    signature=["tool:git", "action:git.push", "action:git.pull"],
    day=24.2,
    hazards=[(NFF, ["force"], HARMED)],
)
win(
    "S-025",
    "success",
    "Send the invoice PDF template change upstream",
    [
        step(
            "git",
            "git pull --rebase origin main",
            "Current branch main is up to date.",
            atoms=["tool:git", "action:git.pull"],
        ),
        commit("update invoice template"),
        step(
            "git",
            "git push origin main",
            f"To {GIT_REMOTE}\n   e7f8091..0a1b2c3  main -> main",
            atoms=PUSH_ATOMS,
        ),
    ],
    scope="git",
    family="git-push-non-fast-forward",
    signature=["tool:git", "action:git.push", "action:git.pull"],
    day=25.1,
    hazards=[(PUSH_ATOMS, ["force"], HARMED)],
)
win(
    "S-026",
    "success",
    "Tag release 2.4.1 and share the tag",
    [
        step(
            "git", "git tag -a v2.4.1 -m 'release 2.4.1'", "", atoms=["tool:git", "action:git.tag"]
        ),
        step(
            "git",
            "git push origin v2.4.1",
            f"To {GIT_REMOTE}\n * [new tag]         v2.4.1 -> v2.4.1",
            atoms=PUSH_ATOMS,
        ),
    ],
    scope="git",
    family="git-release",
    signature=["tool:git", "action:git.tag", "action:git.push"],
    day=12.3,
)
win(
    "NM-044",
    "near_miss",
    "Commit the lint fix and push it; the pre-commit hook fails on trailing whitespace first",
    [
        step(
            "git",
            'git commit -am "fix lint"',
            "trim trailing whitespace.................................................Failed\n"
            "- hook id: trailing-whitespace\n- files were modified by this hook",
            error="pre-commit hook failed",
            atoms=["tool:git", "action:git.commit", "error:hook_failed"],
        ),
        step(
            "git",
            'git commit -am "fix lint"',
            "[main 5d6e7f8] fix lint\n 1 file changed, 1 deletion(-)",
            atoms=["tool:git", "action:git.commit"],
        ),
        step(
            "git",
            "git push origin main",
            f"To {GIT_REMOTE}\n   0a1b2c3..5d6e7f8  main -> main",
            atoms=PUSH_ATOMS,
        ),
    ],
    scope="git",
    family="git-commit-hook",
    signature=["tool:git", "action:git.commit", "error:hook_failed"],
    day=10.6,
    notices=["stall:step_efficiency"],
)
win(
    "NM-045",
    "near_miss",
    "Restore the stashed experiment on the analytics branch",
    [
        step(
            "git",
            "git stash pop",
            "CONFLICT (content): Merge conflict in notebooks/cohorts.py",
            error="stash pop conflict",
            atoms=["tool:git", "action:git.stash", "error:merge_conflict"],
        ),
        step(
            "git",
            "git checkout --theirs notebooks/cohorts.py && git stash drop",
            "Dropped refs/stash@{0}",
            atoms=["tool:git", "action:git.checkout"],
        ),
    ],
    scope="git",
    family="git-stash",
    signature=["tool:git", "action:git.stash", "error:merge_conflict"],
    day=15.2,
    notices=["stall:step_efficiency"],
)

# --- B. flaky test "fixed" by editing code (scope ci) -------------------------------------
FLAKY = Family(
    name="flaky-test",
    scope="ci",
    tool="pytest",
    action="test.run",
    error="flaky_timeout",
    fixes=[
        fix(["rerun"], RESCUED),
        fix(["re-run"], RESCUED),
        fix(["isolation"], RESCUED),
    ],
)


def flaky_steps(test: str, edit: str) -> list[dict]:
    out = (
        f"FAILED {test} - TimeoutError: upload did not finish within 5.0s\n"
        "=== 1 failed, 412 passed in 96.31s ==="
    )
    return [
        step("pytest", "pytest -q", out, error="TimeoutError in " + test, atoms=FLAKY.atoms),
        step(
            "editor",
            f"edit {edit}: raise timeout and remove the retry assertion",
            "1 file changed",
            atoms=["tool:editor", "action:file.edit"],
        ),
        step(
            "pytest",
            "pytest -q",
            "FAILED tests/test_ledger.py::test_balance_after_refund - AssertionError\n"
            "=== 1 failed, 412 passed in 91.02s ===",
            error="new failure after the edit",
            atoms=["tool:pytest", "action:test.run", "error:assertion_failed"],
        ),
    ]


flaky = [
    (
        "F-009",
        "Make the CI pipeline green for the upload service",
        "tests/test_upload.py::test_resumable_upload",
        "src/upload/client.py",
        (
            "when a test fails intermittently with a timeout",
            "re-run the failing test in isolation before changing any code",
        ),
    ),
    (
        "F-010",
        "Fix the red build on the ledger repository",
        "tests/test_sync.py::test_sync_retries",
        "src/ledger/sync.py",
        (
            "when a CI test times out only sometimes",
            "run the failing test alone several times to confirm it is flaky before editing code",
        ),
    ),
    (
        "F-011",
        "Get the nightly integration suite passing",
        "tests/integration/test_s3.py::test_multipart",
        "src/storage/s3.py",
        (
            "if a test is flaky and times out on some runs",
            "rerun it by itself and quarantine it instead of rewriting the code under test",
        ),
    ),
    (
        "F-012",
        "Unblock the merge queue for PR 482",
        "tests/test_queue.py::test_visibility_timeout",
        "src/queue/worker.py",
        None,
    ),
]
for i, (tid, task, test, edit, expected) in enumerate(flaky):
    failure(FLAKY, tid, task, flaky_steps(test, edit), day=2.2 + i * 4, expected=expected)

win(
    "S-030",
    "success",
    "Make the CI pipeline green for the search indexer",
    [
        step(
            "pytest",
            "pytest -q",
            "FAILED tests/test_indexer.py::test_bulk_index - TimeoutError\n"
            "=== 1 failed, 230 passed in 41.10s ===",
            error="TimeoutError in tests/test_indexer.py::test_bulk_index",
            atoms=FLAKY.atoms,
        ),
        step(
            "pytest",
            "pytest -q tests/test_indexer.py::test_bulk_index --count 5",
            "===== 5 passed in 12.40s =====",
            atoms=["tool:pytest", "action:test.rerun"],
        ),
        step(
            "ci",
            "gh pr comment 511 --body 'quarantined flaky test_bulk_index (5/5 pass alone)'",
            "comment added",
            atoms=["tool:ci", "action:ci.quarantine"],
        ),
    ],
    scope="ci",
    family="flaky-test",
    signature=["tool:pytest", "action:test.run", "action:test.rerun"],
    day=22.4,
    hazards=[(FLAKY.atoms, ["skip"], HARMED)],
)
win(
    "S-031",
    "success",
    "Run the unit tests for the billing module",
    [
        step(
            "pytest",
            "pytest -q tests/billing",
            "===== 188 passed in 19.87s =====",
            atoms=["tool:pytest", "action:test.run"],
        )
    ],
    scope="ci",
    family="ci-run",
    signature=["tool:pytest", "action:test.run"],
    day=26.3,
)
win(
    "NM-046",
    "near_miss",
    "Get the smoke tests passing on the staging pipeline",
    [
        step(
            "pytest",
            "pytest -q tests/smoke",
            "FAILED tests/smoke/test_login.py::test_sso - ConnectionResetError",
            error="ConnectionResetError",
            atoms=["tool:pytest", "action:test.run", "error:connection_reset"],
        ),
        step(
            "pytest",
            "pytest -q tests/smoke",
            "===== 24 passed in 8.02s =====",
            atoms=["tool:pytest", "action:test.run"],
        ),
    ],
    scope="ci",
    family="ci-network",
    signature=["tool:pytest", "action:test.run", "error:connection_reset"],
    day=18.8,
    notices=["stall:step_efficiency"],
)

# --- C. pip dependency resolution conflict (scope python) ----------------------------------
PIP = Family(
    name="pip-resolution-conflict",
    scope="python",
    tool="pip",
    action="pip.install",
    error="resolution_impossible",
    fixes=[fix(["lock"], RESCUED), fix(["pinned"], RESCUED), fix(["constraints"], RESCUED)],
)


def pip_steps(package: str, clash: str) -> list[dict]:
    err = (
        f"ERROR: Cannot install {package} because these package versions have conflicting "
        f"dependencies.\nThe conflict is caused by:\n    {clash}\n"
        "ERROR: ResolutionImpossible"
    )
    return [
        step(
            "pip", f"pip install -U {package}", err, error="ResolutionImpossible", atoms=PIP.atoms
        ),
        step(
            "pip",
            "pip install -U --force-reinstall -r requirements.txt",
            "Successfully installed ... (14 packages upgraded)",
            atoms=["tool:pip", "action:pip.install"],
        ),
        step(
            "pytest",
            "pytest -q",
            "ImportError: cannot import name 'url_quote' from 'werkzeug.urls'",
            error="ImportError after upgrade",
            atoms=["tool:pytest", "action:test.run", "error:import_error"],
        ),
    ]


pips = [
    (
        "F-013",
        "Add the sentry-sdk package to the worker image",
        "sentry-sdk==2.18.0",
        "sentry-sdk 2.18.0 depends on urllib3>=2.0; botocore 1.31.0 depends on urllib3<1.27",
        (
            "when pip cannot resolve conflicting dependency versions",
            "install the versions pinned in the lock file instead of upgrading packages",
        ),
    ),
    (
        "F-014",
        "Install the new PDF library for invoices",
        "weasyprint==63.0",
        "weasyprint 63.0 depends on pydyf>=0.11; reportlab-bridge 1.2 depends on pydyf<0.9",
        (
            "if dependency resolution fails with ResolutionImpossible",
            "respect the pinned constraints file rather than upgrading everything",
        ),
    ),
    (
        "F-015",
        "Upgrade Flask for the admin service",
        "flask==3.1.0",
        "flask 3.1.0 depends on werkzeug>=3.1; flask-login 0.6.2 depends on werkzeug<3.0",
        (
            "when installing a package hits a version conflict",
            "keep the lock file's versions and add the package with a compatible pin",
        ),
    ),
    (
        "F-016",
        "Add pandas to the reporting job",
        "pandas==2.2.3",
        "pandas 2.2.3 depends on numpy>=1.26; legacy-stats 0.4 depends on numpy<1.24",
        None,
    ),
]
for i, (tid, task, package, clash, expected) in enumerate(pips):
    failure(PIP, tid, task, pip_steps(package, clash), day=3.1 + i * 5, expected=expected)

win(
    "S-032",
    "success",
    "Add the structlog package to the API service",
    [
        step(
            "pip",
            "pip install -c constraints.txt structlog==24.4.0",
            "Successfully installed structlog-24.4.0",
            atoms=["tool:pip", "action:pip.install"],
        ),
        step(
            "pytest",
            "pytest -q",
            "===== 512 passed in 60.21s =====",
            atoms=["tool:pytest", "action:test.run"],
        ),
    ],
    scope="python",
    family="pip-resolution-conflict",
    signature=["tool:pip", "action:pip.install"],
    day=23.7,
    hazards=[(["tool:pip", "action:pip.install"], ["upgrade"], HARMED)],
)
win(
    "S-033",
    "success",
    "Refresh the lock file after removing an unused dependency",
    [
        step(
            "pip",
            "pip-compile --quiet requirements.in",
            "wrote requirements.txt (41 packages)",
            atoms=["tool:pip", "action:pip.compile"],
        )
    ],
    scope="python",
    family="pip-lock",
    signature=["tool:pip", "action:pip.compile"],
    day=27.2,
)

# --- D. HTTP 429 retried without back-off (scope http) -------------------------------------
HTTP = Family(
    name="http-429-no-backoff",
    scope="http",
    tool="http",
    action="http.request",
    error="http_429",
    fixes=[
        fix(["immediately"], HARMED, effect="harm"),
        fix(["back", "off"], RESCUED),
        fix(["backoff"], RESCUED),
        fix(["retry-after"], RESCUED),
    ],
)


def http_steps(url: str) -> list[dict]:
    return [
        step(
            "http",
            f"GET {url}",
            'HTTP/1.1 429 Too Many Requests\nRetry-After: 30\n{"error": "rate_limited"}',
            error="429 Too Many Requests",
            atoms=HTTP.atoms,
        ),
        step(
            "http",
            f"GET {url}  (retried 40 times in 3 seconds)",
            'HTTP/1.1 403 Forbidden\n{"error": "api key suspended for abuse"}',
            error="403 Forbidden: key suspended",
            atoms=["tool:http", "action:http.request", "error:http_403"],
        ),
    ]


https = [
    (
        "F-017",
        "Export all open GitHub issues for the quarterly review",
        "https://api.github.com/repos/acme/api/issues?state=open&page=7",
        (
            "when an API responds 429 Too Many Requests",
            "back off exponentially and honour the Retry-After header before retrying",
        ),
    ),
    (
        "F-018",
        "Backfill exchange rates for October",
        "https://rates.example.com/v2/history?date=2026-10-14",
        (
            "if the rate limiter returns HTTP 429",
            "wait for the Retry-After interval, then retry with exponential backoff",
        ),
    ),
    (
        "F-019",
        "Sync customer records to the CRM",
        "https://crm.example.com/api/contacts?batch=12",
        (
            "when requests are throttled with status 429",
            "slow down: sleep with increasing delays between retries instead of hammering the API",
        ),
    ),
    (
        "F-020",
        "Download the monthly invoices from the billing provider",
        "https://billing.example.com/v1/invoices?month=2026-10",
        None,
    ),
]
for i, (tid, task, url, expected) in enumerate(https):
    failure(HTTP, tid, task, http_steps(url), day=1.7 + i * 6, expected=expected)

win(
    "S-034",
    "success",
    "Export the closed pull requests for the changelog",
    [
        step(
            "http",
            "GET https://api.github.com/repos/acme/api/pulls?state=closed&page=3",
            "HTTP/1.1 429 Too Many Requests\nRetry-After: 20",
            error="429 Too Many Requests",
            atoms=HTTP.atoms,
        ),
        step("shell", "sleep 20", "", atoms=["tool:shell", "action:sleep"]),
        step(
            "http",
            "GET https://api.github.com/repos/acme/api/pulls?state=closed&page=3",
            "HTTP/1.1 200 OK (100 items)",
            atoms=["tool:http", "action:http.request"],
        ),
    ],
    scope="http",
    family="http-429-no-backoff",
    signature=["tool:http", "action:http.request", "action:sleep"],
    day=24.9,
    hazards=[(HTTP.atoms, ["immediately"], HARMED)],
)
win(
    "S-035",
    "success",
    "Fetch the current feature flags from the flag service",
    [
        step(
            "http",
            "GET https://flags.example.com/api/flags",
            "HTTP/1.1 200 OK (38 flags)",
            atoms=["tool:http", "action:http.request"],
        )
    ],
    scope="http",
    family="http-read",
    signature=["tool:http", "action:http.request"],
    day=26.9,
)

# --- E. editing a file at a path that does not exist (scope repo:payments) -----------------
PATHS = Family(
    name="wrong-file-path",
    scope="repo:payments",
    tool="fs",
    action="file.edit",
    error="file_not_found",
    fixes=[fix(["search"], RESCUED), fix(["find"], RESCUED), fix(["locate"], RESCUED)],
)


def path_steps(wrong: str, right: str) -> list[dict]:
    return [
        step(
            "fs",
            f"edit {wrong}",
            "",
            error=f"FileNotFoundError: [Errno 2] No such file or directory: '{wrong}'",
            atoms=PATHS.atoms,
        ),
        step(
            "fs",
            f"create {wrong} with the new function",
            "created 1 file",
            atoms=["tool:fs", "action:file.create"],
        ),
        step(
            "pytest",
            "pytest -q",
            f"E   ModuleNotFoundError: the change never reached {right}",
            error="tests still fail: the real module is unchanged",
            atoms=["tool:pytest", "action:test.run", "error:assertion_failed"],
        ),
    ]


paths = [
    (
        "F-021",
        "Add a currency guard to the refund handler",
        "src/payments/refund.py",
        "src/payments/handlers/refunds.py",
        (
            "when editing a file fails because the path does not exist",
            "search the repository for the file name and use the real path before editing",
        ),
    ),
    (
        "F-022",
        "Log the idempotency key in the charge service",
        "payments/charge_service.py",
        "src/payments/services/charge.py",
        (
            "if the file to change is not found at the expected path",
            "locate it first with a repository search instead of creating a new file",
        ),
    ),
    (
        "F-023",
        "Rename the settlement batch size setting",
        "config/settlement.yaml",
        "deploy/config/settlement.yml",
        (
            "when a file edit reports No such file or directory",
            "find where the file actually lives before making the change",
        ),
    ),
    (
        "F-024",
        "Fix the typo in the payout email template",
        "templates/payout.html",
        "src/payments/templates/emails/payout.html",
        None,
    ),
]
for i, (tid, task, wrong, right, expected) in enumerate(paths):
    failure(PATHS, tid, task, path_steps(wrong, right), day=2.9 + i * 5.5, expected=expected)

win(
    "S-036",
    "success",
    "Add a metric to the payout scheduler",
    [
        step(
            "fs",
            "search 'payout_scheduler' --files",
            "src/payments/jobs/payout_scheduler.py",
            atoms=["tool:fs", "action:file.search"],
        ),
        step(
            "fs",
            "edit src/payments/jobs/payout_scheduler.py",
            "1 file changed",
            atoms=["tool:fs", "action:file.edit"],
        ),
    ],
    scope="repo:payments",
    family="wrong-file-path",
    signature=["tool:fs", "action:file.search", "action:file.edit"],
    day=25.6,
    hazards=[(["tool:fs", "action:file.edit"], ["create"], HARMED)],
)
win(
    "S-037",
    "success",
    "Update the README section on local setup",
    [step("fs", "edit README.md", "1 file changed", atoms=["tool:fs", "action:file.edit"])],
    scope="repo:payments",
    family="docs-edit",
    signature=["tool:fs", "action:file.edit"],
    day=27.8,
)
win(
    "NM-047",
    "near_miss",
    "Change the refund window constant",
    [
        step(
            "fs",
            "edit src/payments/constants.py",
            "",
            error="FileNotFoundError: [Errno 2] No such file or directory: 'src/payments/constants.py'",
            atoms=["tool:fs", "action:file.edit", "error:file_not_found"],
        ),
        step(
            "fs",
            "search 'REFUND_WINDOW' --content",
            "src/payments/settings/limits.py:12",
            atoms=["tool:fs", "action:file.search"],
        ),
        step(
            "fs",
            "edit src/payments/settings/limits.py",
            "1 file changed",
            atoms=["tool:fs", "action:file.edit"],
        ),
    ],
    scope="repo:payments",
    family="wrong-file-path",
    signature=["tool:fs", "action:file.edit", "action:file.search"],
    day=20.4,
    notices=["stall:step_efficiency"],
)

# --- F. conflicting Django migrations (scope django) ---------------------------------------
MIGRATE = Family(
    name="migration-conflict",
    scope="django",
    tool="django",
    action="django.migrate",
    error="conflicting_migrations",
    fixes=[fix(["merge"], RESCUED), fix(["delete"], HARMED, effect="harm")],
)


def migrate_steps(app: str, a: str, b: str) -> list[dict]:
    err = (
        "CommandError: Conflicting migrations detected; multiple leaf nodes in the migration "
        f"graph: ({a}, {b} in {app}).\nTo fix them run 'python manage.py makemigrations --merge'"
    )
    return [
        step(
            "django",
            "python manage.py migrate",
            err,
            error="Conflicting migrations",
            atoms=MIGRATE.atoms,
        ),
        step(
            "fs",
            f"delete {app}/migrations/{b}.py",
            "removed 1 file",
            atoms=["tool:fs", "action:file.delete"],
        ),
        step(
            "django",
            "python manage.py migrate",
            'django.db.utils.ProgrammingError: column "currency" does not exist',
            error="ProgrammingError after deleting a migration",
            atoms=["tool:django", "action:django.migrate", "error:programming_error"],
        ),
    ]


migrations = [
    (
        "F-025",
        "Apply the new ledger migrations on staging",
        "ledger",
        "0042_add_currency",
        "0042_refund_reason",
        (
            "when migrate reports conflicting migrations",
            "run makemigrations --merge and review the merge migration before migrating",
        ),
    ),
    (
        "F-026",
        "Deploy the schema change for refund reasons",
        "refunds",
        "0007_reason",
        "0007_index_created",
        (
            "if Django finds multiple leaf nodes in the migration graph",
            "create a merge migration instead of deleting either branch's migration",
        ),
    ),
    (
        "F-027",
        "Migrate the local database after rebasing",
        "accounts",
        "0015_mfa",
        "0015_last_login_ip",
        (
            "when two migrations conflict after a rebase",
            "generate a merge migration with makemigrations --merge, never delete a migration",
        ),
    ),
    ("F-028", "Run migrations for the payouts app", "payouts", "0003_batch", "0003_status", None),
]
for i, (tid, task, app, a, b, expected) in enumerate(migrations):
    failure(MIGRATE, tid, task, migrate_steps(app, a, b), day=3.8 + i * 5, expected=expected)

win(
    "S-038",
    "success",
    "Apply the merged migrations for the disputes app",
    [
        step(
            "django",
            "python manage.py makemigrations --merge --noinput",
            "Created new merge migration disputes/migrations/0012_merge.py",
            atoms=["tool:django", "action:django.makemigrations"],
        ),
        step(
            "django",
            "python manage.py migrate",
            "Applying disputes.0012_merge... OK",
            atoms=["tool:django", "action:django.migrate"],
        ),
    ],
    scope="django",
    family="migration-conflict",
    signature=["tool:django", "action:django.makemigrations", "action:django.migrate"],
    day=24.6,
    hazards=[(["tool:django", "action:django.migrate"], ["delete"], HARMED)],
)
win(
    "S-039",
    "success",
    "Show the migration plan for the payouts app",
    [
        step(
            "django",
            "python manage.py showmigrations payouts",
            "payouts\n [X] 0001_initial\n [X] 0002_fees\n [ ] 0003_batch",
            atoms=["tool:django", "action:django.showmigrations"],
        )
    ],
    scope="django",
    family="migration-inspect",
    signature=["tool:django", "action:django.showmigrations"],
    day=26.1,
)

# --- G. container port already allocated (scope docker) ------------------------------------
DOCKER = Family(
    name="port-already-allocated",
    scope="docker",
    tool="docker",
    action="docker.run",
    error="address_in_use",
    fixes=[fix(["port"], RESCUED), fix(["stop"], RESCUED)],
)


def docker_steps(image: str, port: int) -> list[dict]:
    err = (
        f"docker: Error response from daemon: driver failed programming external connectivity: "
        f"Bind for 0.0.0.0:{port} failed: port is already allocated."
    )
    return [
        step(
            "docker",
            f"docker run -d -p {port}:{port} {image}",
            err,
            error="port is already allocated",
            atoms=DOCKER.atoms,
        ),
        step(
            "docker",
            f"docker run -d -p {port}:{port} {image}",
            err,
            error="port is already allocated (retried unchanged)",
            atoms=DOCKER.atoms,
        ),
    ]


dockers = [
    (
        "F-029",
        "Start the local Postgres for the integration tests",
        "postgres:16",
        5432,
        (
            "when a container fails to start because the port is already allocated",
            "stop the container holding the port or map a free host port",
        ),
    ),
    (
        "F-030",
        "Bring up the mock payment gateway",
        "acme/mock-gateway:1.8",
        8080,
        (
            "if docker run reports the address is already in use",
            "find what is listening on that port and free it, or publish on another port",
        ),
    ),
    ("F-031", "Run Redis for the queue worker tests", "redis:7", 6379, None),
]
for i, (tid, task, image, port, expected) in enumerate(dockers):
    failure(DOCKER, tid, task, docker_steps(image, port), day=5.3 + i * 7, expected=expected)

win(
    "S-040",
    "success",
    "Start the local Redis for the cache tests",
    [
        step(
            "docker",
            "docker ps --filter publish=6379 --format '{{.Names}}'",
            "old-redis",
            atoms=["tool:docker", "action:docker.ps"],
        ),
        step(
            "docker",
            "docker stop old-redis",
            "old-redis",
            atoms=["tool:docker", "action:docker.stop"],
        ),
        step(
            "docker",
            "docker run -d -p 6379:6379 redis:7",
            "3f9a1c...",
            atoms=["tool:docker", "action:docker.run"],
        ),
    ],
    scope="docker",
    family="port-already-allocated",
    signature=["tool:docker", "action:docker.ps", "action:docker.stop", "action:docker.run"],
    day=25.9,
)
win(
    "NM-048",
    "near_miss",
    "Start the metrics stack for the load test",
    [
        step(
            "docker",
            "docker compose up -d",
            'Error response from daemon: Conflict. The container name "/grafana" is already in use',
            error="container name in use",
            atoms=["tool:docker", "action:docker.compose", "error:name_conflict"],
        ),
        step(
            "docker",
            "docker compose up -d --force-recreate",
            "Started 3 containers",
            atoms=["tool:docker", "action:docker.compose"],
        ),
    ],
    scope="docker",
    family="docker-name-conflict",
    signature=["tool:docker", "action:docker.compose", "error:name_conflict"],
    day=21.5,
    notices=["stall:step_efficiency"],
)

# --- H. rollout stuck on ImagePullBackOff (scope deploy): production, not replayable --------
DEPLOY = Family(
    name="image-pull-backoff",
    scope="deploy",
    tool="kubectl",
    action="deploy.rollout",
    error="image_pull_backoff",
    fixes=[],
)


def deploy_steps(service: str, tag: str) -> list[dict]:
    return [
        step(
            "kubectl",
            f"kubectl set image deploy/{service} app=registry.acme.io/{service}:{tag}",
            f"deployment.apps/{service} image updated",
            atoms=["tool:kubectl", "action:deploy.set_image"],
        ),
        step(
            "kubectl",
            f"kubectl rollout status deploy/{service} --timeout=300s",
            f'Waiting for deployment "{service}" rollout to finish: 0 of 3 updated replicas are '
            "available...\nerror: deployment exceeded its progress deadline",
            error=f"ImagePullBackOff: registry.acme.io/{service}:{tag} not found",
            atoms=DEPLOY.atoms,
        ),
    ]


deploys = [
    (
        "F-032",
        "Roll out the fraud-scoring service v3.2",
        "fraud-scoring",
        "v3.2",
        (
            "when a rollout stalls with ImagePullBackOff",
            "verify the image tag exists in the registry before applying the deployment",
        ),
    ),
    (
        "F-033",
        "Deploy the new webhook relay build",
        "webhook-relay",
        "2026.11.14",
        (
            "if pods cannot pull the new image during a deploy",
            "check that the tag was pushed to the registry before rolling out",
        ),
    ),
    ("F-034", "Release the notifications worker", "notifications", "1.9.0-rc", None),
]
for i, (tid, task, service, tag, expected) in enumerate(deploys):
    failure(
        DEPLOY,
        tid,
        task,
        deploy_steps(service, tag),
        day=6.4 + i * 8,
        expected=expected,
        replayable=False,
    )

# --- Healthy sessions of other kinds, so the corpus is not all incidents -------------------
win(
    "S-041",
    "success",
    "Summarise yesterday's failed payments for the on-call channel",
    [
        step(
            "sql",
            "SELECT status, count(*) FROM payments WHERE created_at >= now() - interval '1 day' "
            "GROUP BY status",
            "failed | 17\nsucceeded | 4210",
            atoms=["tool:sql", "action:sql.query"],
        ),
        step("slack", "post #payments-oncall", "ok", atoms=["tool:slack", "action:slack.post"]),
    ],
    scope="global",
    family="reporting",
    signature=["tool:sql", "action:sql.query", "action:slack.post"],
    day=27.5,
)
win(
    "S-042",
    "success",
    "Rotate the staging database password",
    [
        step(
            "vault",
            "vault write -f database/rotate-root/staging",
            "Success! Data written to: database/rotate-root/staging",
            atoms=["tool:vault", "action:vault.rotate"],
        )
    ],
    scope="global",
    family="secrets",
    signature=["tool:vault", "action:vault.rotate"],
    day=19.3,
)
win(
    "S-043",
    "success",
    "Build the worker image for the ARM runners",
    [
        step(
            "docker",
            "docker buildx build --platform linux/arm64 -t acme/worker:arm64 .",
            "=> exporting to image 12.4s done",
            atoms=["tool:docker", "action:docker.build"],
        )
    ],
    scope="docker",
    family="docker-build",
    signature=["tool:docker", "action:docker.build"],
    day=23.1,
)
win(
    "NM-049",
    "near_miss",
    "Regenerate the API client from the OpenAPI schema",
    [
        step(
            "shell",
            "openapi-generator generate -i openapi.yaml -g python -o client/",
            "",
            error="Exception: attribute components.schemas.Refund.reason is missing",
            atoms=["tool:shell", "action:codegen", "error:schema_invalid"],
        ),
        step("fs", "edit openapi.yaml", "1 file changed", atoms=["tool:fs", "action:file.edit"]),
        step(
            "shell",
            "openapi-generator generate -i openapi.yaml -g python -o client/",
            "Successfully generated code to client/",
            atoms=["tool:shell", "action:codegen"],
        ),
    ],
    scope="global",
    family="codegen",
    signature=["tool:shell", "action:codegen", "error:schema_invalid"],
    day=16.7,
    notices=["stall:step_efficiency"],
)

win(
    "S-020",
    "success",
    "List the remote feature branches older than 90 days",
    [
        step(
            "git",
            "git for-each-ref --sort=committerdate refs/remotes/origin --format='%(refname:short) %(committerdate:relative)'",
            "origin/feature/old-ledger 5 months ago\norigin/feature/sca-flow 4 months ago",
            atoms=["tool:git", "action:git.for_each_ref"],
        )
    ],
    scope="git",
    family="git-inspect",
    signature=["tool:git", "action:git.for_each_ref"],
    day=9.4,
)
win(
    "S-021",
    "success",
    "Send a test webhook to the partner sandbox",
    [
        step(
            "http",
            "POST https://sandbox.partner.example.com/hooks/payments",
            "HTTP/1.1 202 Accepted",
            atoms=["tool:http", "action:http.request"],
        )
    ],
    scope="http",
    family="http-write",
    signature=["tool:http", "action:http.request"],
    day=14.1,
)
win(
    "S-027",
    "success",
    "List outdated packages in the API service",
    [
        step(
            "pip",
            "pip list --outdated --format=columns",
            "Package  Version Latest\nboto3    1.35.2  1.35.60",
            atoms=["tool:pip", "action:pip.list"],
        )
    ],
    scope="python",
    family="pip-inspect",
    signature=["tool:pip", "action:pip.list"],
    day=17.9,
)


# --- Candidates (semantics §15 record_candidates) ------------------------------------------------
# What each is for is in the comment beside it; tests/test_gate.py and the engine's demo test
# rely on C-001, C-002, C-009, C-010 and C-012 as described.
CANDIDATES = [
    # The F-001 rule: right, replay rescues the failing pushes (promote). Its gate is the
    # semantics §11 example: lexical INCONCLUSIVE, signature PASS.
    {
        "id": "C-001",
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull the latest changes with rebase before pushing again",
        "scope": "git",
        "metric": "task_completion",
        "signature": NFF,
        "tags": ["git", "demo:f-001"],
        "source_case": "F-001",
    },
    # Wrong: a force push gets the failing push through but overwrites a teammate's work on the
    # protected win S-024 (retire on the win's regression).
    {
        "id": "C-002",
        "trigger": "when git push is rejected as non-fast-forward",
        "directive": "force push with --force to overwrite the remote branch",
        "scope": "git",
        "metric": "task_completion",
        "signature": NFF,
        "tags": ["git", "demo:harms-win"],
        "source_case": "F-002",
    },
    # Right, and reworded against F-009's expected rule: token-F1 low, semantic high.
    {
        "id": "C-003",
        "trigger": "if a test only fails some of the time and passes on a retry",
        "directive": "rerun that single test by itself a few times before you touch the code",
        "scope": "ci",
        "metric": "task_completion",
        "signature": FLAKY.atoms,
        "tags": ["ci", "demo:reworded"],
        "source_case": "F-009",
    },
    # Right, reworded (F-013).
    {
        "id": "C-004",
        "trigger": "when dependency resolution fails with conflicting requirements",
        "directive": "use the lock file's pinned versions rather than upgrading anything",
        "scope": "python",
        "metric": "task_completion",
        "signature": PIP.atoms,
        "tags": ["python", "demo:reworded"],
        "source_case": "F-013",
    },
    # Wrong, with the same words as F-017's expected rule but the opposite advice: replay
    # retires it on an attributable regression; extraction must call it a miss.
    {
        "id": "C-005",
        "trigger": "when an API responds 429 Too Many Requests",
        "directive": "retry the request immediately until it succeeds",
        "scope": "http",
        "metric": "task_completion",
        "signature": HTTP.atoms,
        "tags": ["http", "demo:same-words-other-meaning"],
        "source_case": "F-017",
    },
    # Right (F-018).
    {
        "id": "C-006",
        "trigger": "if the rate limiter returns HTTP 429",
        "directive": "honour Retry-After and back off exponentially before retrying",
        "scope": "http",
        "metric": "task_completion",
        "signature": HTTP.atoms,
        "tags": ["http"],
        "source_case": "F-018",
    },
    # Wrong in a quiet way: creating the missing file changes nothing on replay (retire:
    # no improvement).
    {
        "id": "C-007",
        "trigger": "when a file edit fails with no such file or directory",
        "directive": "create the missing file with the intended contents",
        "scope": "repo:payments",
        "metric": "task_completion",
        "signature": PATHS.atoms,
        "tags": ["repo", "demo:no-improvement"],
        "source_case": "F-021",
    },
    # Right (F-025).
    {
        "id": "C-008",
        "trigger": "when migrate reports conflicting migrations",
        "directive": "run makemigrations --merge, review the merge migration, then migrate",
        "scope": "django",
        "metric": "task_completion",
        "signature": MIGRATE.atoms,
        "tags": ["django"],
        "source_case": "F-025",
    },
    # Every failure of its family is replayable: false (production): decided by forward trial
    # on task_completion (the engine engineer's reports_live drives it).
    {
        "id": "C-009",
        "trigger": "when a rollout stalls with ImagePullBackOff",
        "directive": "confirm the image tag exists in the registry before applying the rollout",
        "scope": "deploy",
        "metric": "task_completion",
        "signature": DEPLOY.atoms,
        "tags": ["deploy", "demo:forward-trial"],
        "source_case": "F-032",
    },
    # Matches no stored case at all (no_matching_replayable_case): decided by its forward trial
    # on tool_correctness once live sessions report. (The demo's lasting pending candidate is
    # C-013 in candidates_late.jsonl, recorded after the live reports.)
    {
        "id": "C-010",
        "trigger": "when the build runner reports no space left on device",
        "directive": "prune old build caches before writing artifacts",
        "scope": "ci",
        "metric": "tool_correctness",
        "signature": ["tool:shell", "action:build.write", "error:no_space_left"],
        "tags": ["ci", "demo:pending"],
    },
    # Right, reworded (F-029).
    {
        "id": "C-011",
        "trigger": "if docker cannot bind the host port because something already uses it",
        "directive": "stop whatever holds the port, or publish the container on a free port",
        "scope": "docker",
        "metric": "task_completion",
        "signature": DOCKER.atoms,
        "tags": ["docker", "demo:reworded"],
        "source_case": "F-029",
    },
    # Says what C-001 says in other words (a second extraction from F-001), same scope and
    # signature: recorded after C-001, it is linked to it as a probable duplicate.
    {
        "id": "C-012",
        "trigger": "if git push fails because it is not a fast-forward",
        "directive": "first pull and rebase onto the latest remote changes, then push",
        "scope": "git",
        "metric": "task_completion",
        "signature": NFF,
        "tags": ["git", "demo:duplicate"],
        "source_case": "F-001",
    },
]


def write(out: Path = OUT) -> str:
    """Write both files into `out`; returns a one-line summary."""
    out.mkdir(parents=True, exist_ok=True)
    ids = [line["id"] for line in LINES]
    assert len(ids) == len(set(ids)), "duplicate trajectory id"
    lines = sorted(LINES, key=lambda line: (line["started_at"], line["id"]))
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
    with open(out / "candidates.jsonl", "w", encoding="utf-8") as fh:
        for cand in CANDIDATES:
            fh.write(json.dumps(cand, ensure_ascii=False) + "\n")
    kinds = {
        k: sum(1 for t in LINES if t["kind"] == k) for k in ("failure", "success", "near_miss")
    }
    expected = sum(1 for line in LINES if "expected_rule" in line)
    return (
        f"wrote {len(LINES)} trajectories ({kinds}), {expected} with expected_rule, "
        f"{len(CANDIDATES)} candidates → {out}"
    )


if __name__ == "__main__":
    print(write())
