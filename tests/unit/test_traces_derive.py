"""Signature derivation (semantics §19, §11): the same failure worded differently gets the same
`error:` atom, near-miss texts do not, and every atom says which text produced it. Pure: no
database."""

import json
import subprocess
import sys

import pytest

from traces import templates
from traces.derive import derive_signature, derive_step, with_derived_signature


def error_atoms(text: str, **step) -> set[str]:
    """The error-class atoms of a failed shell step whose error is `text`."""
    derived = derive_step({"tool": "bash", "input": "true", "error": text, **step})
    return {a for a in derived.atoms if a.partition(":")[0] in ("error", "exception", "exit")}


WORDINGS = {
    "non_fast_forward": [
        "! [rejected]        main -> main (non-fast-forward)",
        "hint: Updates were rejected because the tip of your current branch is behind\n"
        "hint: its remote counterpart. Integrate the remote changes (e.g.\n"
        "hint: 'git pull ...') before pushing again.",
        " ! [rejected]        feature/x -> feature/x (fetch first)\n"
        "error: failed to push some refs to 'origin'",
        "hint: Updates were rejected because the remote contains work that you do not\n"
        "hint: have locally. This is usually caused by another repository pushing",
        "To https://gitlab.com/acme/api.git\n ! [rejected]   release/2.4 -> release/2.4 (non-fast-forward)",
        "error: failed to push some refs to 'https://github.com/acme/app'\n"
        "hint: Updates were rejected because a pushed branch tip is behind its remote",
        "abort: push creates new remote head 4e1c2a7!",
        "Push rejected: main is not a fast-forward of origin/main",
    ],
    "http_429": [
        "HTTP/1.1 429 Too Many Requests\nRetry-After: 30",
        "openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached'}}",
        "API rate limit exceeded for 203.0.113.7. (But here's the good news: authenticated "
        "requests get a higher rate limit.)",
        "requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: "
        "https://api.example.com/v1/items",
        "Error: You have exceeded your rate limit. Please retry after 30 seconds.",
        "botocore.exceptions.ClientError: An error occurred (ThrottlingException) when calling "
        "the InvokeModel operation: Too many tokens, please wait before trying again.",
        "Request failed with status code 429",
        "google.api_core.exceptions.ResourceExhausted: 429 RESOURCE_EXHAUSTED",
        '{"error": "rate_limited", "retry_after": 12}',
        "You are being rate limited. Slow down.",
        "fatal: unable to access 'https://x/': The requested URL returned error: 429",
        "requests.exceptions.HTTPError: 429",
    ],
    "file_not_found": [
        "FileNotFoundError: [Errno 2] No such file or directory: 'src/payments/refund.py'",
        "cat: config/settings.yaml: No such file or directory",
        "Error: ENOENT: no such file or directory, open '/app/package.json'",
        "java.nio.file.NoSuchFileException: /data/input.csv",
        "The system cannot find the file specified.",
        "error: path 'docs/guide.md' does not exist in 'HEAD'",
        "python3: can't open file '/work/run.py': [Errno 2] No such file or directory",
    ],
    "permission_denied": [
        "PermissionError: [Errno 13] Permission denied: '/etc/hosts'",
        "bash: ./deploy.sh: Permission denied",
        "npm ERR! code EACCES\nnpm ERR! syscall mkdir",
        "rm: cannot remove '/var/log/app.log': Operation not permitted",
        "Access is denied.",
        "Error: EACCES: permission denied, open '/usr/lib/node_modules/x/package.json'",
    ],
    "no_space_left": [
        "OSError: [Errno 28] No space left on device",
        "write /var/lib/docker/tmp/GetImageBlob: no space left on device",
        "Error: ENOSPC: no space left on device, write",
        "There is not enough space on the disk.",
        "cp: error writing 'big.iso': Disk quota exceeded",
        "fatal: sha1 file '.git/objects/pack/tmp_pack_x' write error: No space left on device",
    ],
    "too_many_open_files": [
        "OSError: [Errno 24] Too many open files: '/tmp/x'",
        "Error: EMFILE: too many open files, watch '/app/src'",
        "http: Accept error: accept tcp [::]:8080: accept4: too many open files; retrying in 5ms",
        "java.io.IOException: Too many open files",
        "socket(): ENFILE (file table overflow)",
    ],
    "out_of_memory": [
        'Traceback (most recent call last):\n  File "x.py", line 3\nMemoryError',
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
        "Last State: Terminated\n  Reason: OOMKilled\n  Exit Code: 137",
        "bash: fork: Cannot allocate memory",
        "Out of memory: Killed process 4242 (python3) total-vm:8123456kB",
    ],
    "timeout": [
        "TimeoutError: upload did not finish within 5.0s",
        "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='api.x.com', port=443): "
        "Read timed out. (read timeout=10)",
        "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
        "Error: connect ETIMEDOUT 10.0.0.5:5432",
        "The operation timed out after 30 seconds",
        "subprocess.TimeoutExpired: Command 'pytest' timed out after 300 seconds",
        "asyncio.exceptions.TimeoutError",
    ],
    "merge_conflict": [
        "CONFLICT (content): Merge conflict in src/app.py\n"
        "Automatic merge failed; fix conflicts and then commit the result.",
        "error: could not apply 4e1c2a7... Add rounding\n"
        "hint: Resolve all conflicts manually, mark them as resolved with",
        "error: Pulling is not possible because you have unmerged files.",
        "CONFLICT (modify/delete): docs/x.md deleted in HEAD and modified in feature.",
        "Auto-merging README.md\nCONFLICT (add/add): Merge conflict in README.md",
        "error: Merging is not possible because you have unmerged files.",
    ],
    "module_not_found": [
        "ModuleNotFoundError: No module named 'requests'",
        "Error: Cannot find module 'express'\nRequire stack:\n- /app/server.js",
        "ImportError: No module named yaml",
        "Module not found: Error: Can't resolve './components/Button' in '/app/src'",
        "error[E0432]: unresolved import `serde_json`",
        "main.go:4:2: package github.com/foo/bar is not in GOROOT (/usr/local/go/src/x)",
    ],
    "connection_refused": [
        "psycopg2.OperationalError: could not connect to server: Connection refused",
        "curl: (7) Failed to connect to localhost port 8080 after 0 ms: Connection refused",
        "Error: connect ECONNREFUSED 127.0.0.1:6379",
        "dial tcp 127.0.0.1:5432: connect: connection refused",
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "urllib3.exceptions.NewConnectionError: Failed to establish a new connection: "
        "[Errno 111] Connection refused",
    ],
    "dns_failure": [
        "curl: (6) Could not resolve host: api.internal",
        "npm ERR! request to https://registry.npmjs.org/x failed, reason: getaddrinfo "
        "ENOTFOUND registry.npmjs.org",
        "socket.gaierror: [Errno -2] Name or service not known",
        "dial tcp: lookup db.prod on 10.0.0.2:53: no such host",
        "ssh: Could not resolve hostname git.acme.io: Temporary failure in name resolution",
        "urllib3.exceptions.NameResolutionError: Failed to resolve 'api.x.com'",
    ],
    "address_in_use": [
        "OSError: [Errno 98] Address already in use",
        "Error: listen EADDRINUSE: address already in use :::3000",
        "docker: Error response from daemon: driver failed programming external connectivity: "
        "Bind for 0.0.0.0:5432 failed: port is already allocated.",
        "listen tcp :8080: bind: address already in use",
        "Only one usage of each socket address (protocol/network address/port) is normally "
        "permitted.",
    ],
    "resolution_impossible": [
        "ERROR: Cannot install sentry-sdk==2.18.0 because these package versions have "
        "conflicting dependencies.",
        "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/",
        "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree",
        "Because app depends on both requests (>=2.32) and legacy (1.0) which depends on "
        "requests (<2.0), version solving failed.",
        "npm error ERESOLVE could not resolve",
    ],
    "image_pull_backoff": [
        "ImagePullBackOff: registry.acme.io/fraud-scoring:v3.2 not found",
        "Warning  Failed  12s  kubelet  Error: ErrImagePull",
        'Normal  BackOff  3s  kubelet  Back-off pulling image "acme/api:v9"',
        'Failed to pull image "ghcr.io/acme/api:v2": rpc error: code = NotFound',
        "api-7d9f  0/1  ImagePullBackOff  0  2m",
    ],
}


@pytest.mark.parametrize(
    ("mode", "text"),
    [(mode, text) for mode, texts in WORDINGS.items() for text in texts],
    ids=lambda v: v if len(v) < 40 else v[:40],
)
def test_each_wording_of_a_failure_gets_the_failure_modes_atom_and_no_other(mode, text):
    assert {a for a in error_atoms(text) if a.startswith("error:")} == {f"error:{mode}"}


def test_every_mode_is_tried_with_at_least_five_wordings():
    assert len(WORDINGS) >= 10
    assert all(len(texts) >= 5 for texts in WORDINGS.values())


@pytest.mark.parametrize(
    ("text", "atom"),
    [
        ("HTTP/1.1 503 Service Unavailable\nRetry-After: 120", "error:http_503"),
        ("<html><head><title>502 Bad Gateway</title></head></html>", "error:http_502"),
        ("urllib.error.HTTPError: HTTP Error 404: Not Found", "error:http_404"),
        ("401 Client Error: Unauthorized for url: https://x/y", "error:http_401"),
        ("AxiosError: Request failed with status code 500", "error:http_500"),
        ("the server answered: response code 403", "error:http_403"),
        (
            "fatal: unable to access 'https://github.com/a/b/': The requested URL returned error: 403",
            "error:http_403",
        ),
        (
            "fatal: Need to specify how to reconcile divergent branches.",
            "error:cannot_fast_forward",
        ),
        ("Error: Error acquiring the state lock", "error:lock_timeout"),
        ("Process exited with code 2", "exit:2"),
        ("Command failed with exit code 128: git fetch", "exit:128"),
        (
            "subprocess.CalledProcessError: Command '['make']' returned non-zero exit status 2.",
            "exit:2",
        ),
        ("Error: Process completed with exit code 1.", "exit:1"),
        ("ValueError: invalid literal for int() with base 10: 'x'", "exception:ValueError"),
        ("KeyError: 'user_id'", "exception:KeyError"),
        ("TypeError: Cannot read properties of undefined (reading 'map')", "exception:TypeError"),
        (
            "django.db.utils.IntegrityError: UNIQUE constraint failed: x.id",
            "exception:IntegrityError",
        ),
        (
            "Exception in thread main java.lang.NullPointerException",
            "exception:NullPointerException",
        ),
        ("ZeroDivisionError: division by zero", "exception:ZeroDivisionError"),
    ],
)
def test_statuses_exit_codes_and_exception_classes_have_their_own_atoms(text, atom):
    assert atom in error_atoms(text)


def test_an_exit_code_field_gives_an_exit_atom():
    assert "exit:137" in error_atoms("", exit_code=137)
    assert derive_step({"tool": "bash", "input": "ls", "exit_code": 0}).atoms == [
        "tool:bash",
        "action:ls",
    ]


@pytest.mark.parametrize(
    ("text", "not_atom"),
    [
        (
            "! [remote rejected] main -> main (protected branch hook declined)",
            "error:non_fast_forward",
        ),
        ("fatal: Not possible to fast-forward, aborting.", "error:non_fast_forward"),
        ("HTTP/1.1 503 Service Unavailable\nRetry-After: 120", "error:http_429"),
        (
            "FAILED tests/test_a.py::test_b\n=== 1 failed, 412 passed in 96.31s ===",
            "error:http_412",
        ),
        (
            'django.db.utils.ProgrammingError: column "currency" does not exist',
            "error:file_not_found",
        ),
        (
            "CommandError: Conflicting migrations detected; multiple leaf nodes",
            "error:merge_conflict",
        ),
        (
            'Error response from daemon: Conflict. The container name "/grafana" is already in use',
            "error:merge_conflict",
        ),
        (
            'Error response from daemon: Conflict. The container name "/grafana" is already in use',
            "error:http_409",
        ),
        ("git@github.com: Permission denied (publickey).", "error:permission_denied"),
        (
            "ImportError: cannot import name 'url_quote' from 'werkzeug.urls'",
            "error:module_not_found",
        ),
        ('error: deployment "api" exceeded its progress deadline', "error:timeout"),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", "error:connection_refused"),
        ("ValueError: invalid value for --timeout: 'abc'", "error:timeout"),
        ("KeyError: 'timeout'", "error:timeout"),
        ("FAILED tests/test_timeout.py::test_retry - AssertionError", "error:timeout"),
        (
            "ERROR: Could not find a version that satisfies the requirement foo==9.9",
            "error:resolution_impossible",
        ),
        ("HTTP/1.1 404 Not Found", "error:file_not_found"),
        ("Exit code: 0", "exit:0"),
    ],
)
def test_near_miss_texts_do_not_get_the_atom(text, not_atom):
    assert not_atom not in error_atoms(text)


@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("git push origin main", "To github.com:acme/x.git\n   0a1b2c3..5d6e7f8  main -> main"),
        (
            "git pull",
            "Updating 0a1b2c3..5d6e7f8\nFast-forward\n src/app.py | 2 +-\n 1 file changed",
        ),
        (
            "git status",
            "On branch main\nYour branch is behind 'origin/main' by 2 commits, and can be "
            'fast-forwarded.\n  (use "git pull" to update your local branch)',
        ),
        ("git push --force-with-lease", " + 4e1c2a7...9f8e7d6 main -> main (forced update)"),
        ("curl -i https://api.github.com/rate_limit", "HTTP/1.1 200 OK\nX-RateLimit-Remaining: 0"),
        ("grep -r denied logs/", "logs/app.log:12: Permission denied for user bob"),
        ("pytest -q", "===== 24 passed in 8.02s ====="),
    ],
)
def test_a_clean_run_gets_no_error_atom_whatever_its_output_says(command, output):
    derived = derive_step({"tool": "bash", "input": command, "output": output})
    assert not derived.failed
    assert not [a for a in derived.atoms if a.startswith(("error:", "exception:", "exit:"))]


@pytest.mark.parametrize(
    ("step", "atoms"),
    [
        (
            {"tool": "bash", "input": "git push origin main"},
            ["tool:bash", "tool:git", "action:git.push"],
        ),
        (
            {"tool": "git", "input": "git -C repo push -u origin main"},
            ["tool:git", "action:git.push"],
        ),
        (
            {"tool": "bash", "arguments": {"command": "cd repo && git push"}},
            ["tool:bash", "tool:git", "action:git.push"],
        ),
        (
            {"tool": "shell", "input": "GIT_SSH_COMMAND='ssh -i k' git push"},
            ["tool:shell", "tool:git", "action:git.push"],
        ),
        ({"tool": "npm", "input": "npm i lodash"}, ["tool:npm", "action:npm.install"]),
        (
            {"tool": "pip", "input": "python -m pip install -U flask"},
            ["tool:pip", "action:pip.install"],
        ),
        (
            {"tool": "bash", "input": "uv pip install flask"},
            ["tool:bash", "tool:pip", "action:pip.install"],
        ),
        (
            {"tool": "docker", "input": "docker compose up -d"},
            ["tool:docker", "action:docker.compose"],
        ),
        (
            {"tool": "docker", "input": "docker buildx build --platform linux/arm64 ."},
            ["tool:docker", "action:docker.build"],
        ),
        (
            {"tool": "kubectl", "input": "kubectl apply -f deploy.yaml"},
            ["tool:kubectl", "action:kubectl.apply"],
        ),
        (
            {"tool": "kubectl", "input": "kubectl rollout status deploy/api"},
            ["tool:kubectl", "action:deploy.rollout"],
        ),
        (
            {"tool": "http", "input": "GET https://api.github.com/repos"},
            ["tool:http", "action:http.request"],
        ),
        (
            {"tool": "http_request", "arguments": {"method": "post", "url": "https://x/y"}},
            ["tool:http_request", "tool:http", "action:http.request"],
        ),
        (
            {"tool": "bash", "input": "curl -X POST https://x/y"},
            ["tool:bash", "tool:http", "action:http.request"],
        ),
        (
            {"tool": "django", "input": "python manage.py migrate"},
            ["tool:django", "action:django.migrate"],
        ),
        (
            {"tool": "bash", "input": "pytest -q tests/"},
            ["tool:bash", "tool:pytest", "action:test.run"],
        ),
        (
            {"tool": "bash", "input": "sudo apt-get install -y jq"},
            ["tool:bash", "tool:apt", "action:apt.install"],
        ),
        (
            {"tool": "read_file", "arguments": {"path": "a.py"}},
            ["tool:read_file", "action:file.read"],
        ),
        ({"tool": "Edit", "arguments": {"file_path": "a.py"}}, ["tool:edit", "action:file.edit"]),
        ({"tool": "get_weather", "arguments": {"city": "Paris"}}, ["tool:get_weather"]),
    ],
)
def test_tool_and_action_atoms_come_from_the_tool_and_its_command(step, atoms):
    assert derive_step(step).atoms == atoms


def test_a_failure_carries_the_atoms_of_its_first_failed_step_with_reasons():
    trajectory = {
        "kind": "failure",
        "steps": [
            {"tool": "git", "input": "git commit -am x", "output": "[main 4e1c2a7] x"},
            {
                "tool": "git",
                "input": "git push origin main",
                "error": "! [rejected]        main -> main (non-fast-forward)",
            },
            {"tool": "pytest", "input": "pytest", "error": "AssertionError"},
        ],
    }
    signature, reasons, _ = derive_signature(trajectory)
    assert signature == ["tool:git", "action:git.push", "error:non_fast_forward"]
    because = {r.atom: r for r in reasons}
    assert because["error:non_fast_forward"].rule == "git.non_fast_forward"
    assert because["error:non_fast_forward"].source == "steps[1].error"
    assert because["error:non_fast_forward"].match == "non-fast-forward"
    assert because["action:git.push"].match == "git push origin"


def test_a_success_carries_its_tools_and_actions_and_no_error():
    trajectory = {
        "kind": "success",
        "steps": [
            {"tool": "git", "input": "git push origin main", "error": "! [rejected] (fetch first)"},
            {"tool": "git", "input": "git pull --rebase"},
            {"tool": "git", "input": "git push origin main"},
        ],
    }
    assert derive_signature(trajectory)[0] == ["tool:git", "action:git.push", "action:git.pull"]


def test_a_failure_without_a_failed_step_takes_its_error_from_the_outcome():
    trajectory = {
        "kind": "failure",
        "steps": [{"tool": "http", "input": "GET https://x/y", "output": "{}"}],
        "outcome": {"status": "failed", "summary": "gave up after 429 Too Many Requests"},
    }
    assert derive_signature(trajectory)[0] == ["tool:http", "action:http.request", "error:http_429"]


def test_a_given_signature_is_kept_and_a_missing_one_is_derived_and_explained():
    given = {"kind": "failure", "signature": ["error:mine"], "steps": []}
    assert with_derived_signature(given) is given
    derived = with_derived_signature(
        {
            "kind": "failure",
            "steps": [{"tool": "pip", "input": "pip install x", "error": "ResolutionImpossible"}],
            "meta": {"a": 1},
        }
    )
    assert derived["signature"] == ["tool:pip", "action:pip.install", "error:resolution_impossible"]
    assert derived["steps"][0]["atoms"] == derived["signature"]
    explained = derived["meta"]["signature_derivation"]
    assert derived["meta"]["a"] == 1
    assert [b["atom"] for b in explained["because"]] == derived["signature"]


def test_an_unknown_error_gets_a_template_atom_shared_by_its_rewordings():
    first = error_atoms("Exception: attribute components.schemas.Refund.reason is missing")
    second = error_atoms("Exception: attribute components.schemas.Invoice.total is missing")
    other = error_atoms("Error: No such container: old-redis")
    assert first == second and len(first) == 1
    assert next(iter(first)).startswith("error:tmpl_")
    assert first != other


def test_the_template_atom_is_the_same_in_another_process():
    text = "widget frobnication failed for job 4242 at 0x7f3a9c"
    here = templates.template_for(text).atom_value
    code = (
        "import json,sys; from traces import templates; "
        f"print(templates.template_for({text!r}).atom_value)"
    )
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert there.stdout.strip() == here


def test_the_learned_templates_are_listed_and_mining_a_batch_groups_rewordings():
    assert any("<*>" in t["template"] for t in templates.seeded_templates())
    mined = templates.mine(
        [
            "deploy of api-7 stalled on node n1 waiting for quorum",
            "deploy of web-2 stalled on node n9 waiting for quorum",
            "totally different thing",
        ]
    )
    assert mined[0]["texts"] == 2
    assert json.dumps(mined)


def test_a_bare_error_label_does_not_make_every_unknown_failure_alike():
    first = derive_step({"tool": "bash", "error": "tool_error", "output": "lease 7 lost on node-2"})
    second = derive_step({"tool": "bash", "error": "tool_error", "output": "widget jammed in slot"})
    first_errors = [a for a in first.atoms if a.startswith("error:")]
    second_errors = [a for a in second.atoms if a.startswith("error:")]
    assert first_errors and second_errors and first_errors != second_errors
