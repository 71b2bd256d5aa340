"""Production settings: with DEBUG off and nothing else said, `check --deploy` finds nothing to
say about HTTPS, HSTS or cookies; every page carries the Content-Security-Policy."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRANSPORT_WARNINGS = ("security.W004", "security.W008", "security.W012", "security.W016")


def run(code: str, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("CAUTERWEB_", "DEBUG"))}
    environment.update(
        {
            "DEBUG": "false",
            "SECRET_KEY": "k" * 20 + "production-like-secret-key-0123456789-abcdefghijklmnop",
            "ALLOWED_HOSTS": "cauterweb.example.com",
            "DJANGO_SETTINGS_MODULE": "cauterweb.settings",
            **env,
        }
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_deploy(**env) -> str:
    result = run(
        "import django, sys; django.setup(); from django.core.management import call_command;"
        "call_command('check', deploy=True, stdout=sys.stdout, stderr=sys.stdout)",
        **env,
    )
    return result.stdout + result.stderr


def test_check_deploy_is_silent_about_transport_security_by_default():
    output = check_deploy()
    assert "System check identified" in output or "no issues" in output, output
    assert [w for w in TRANSPORT_WARNINGS if w in output] == [], output


def test_plain_http_is_a_choice_that_check_deploy_reports():
    output = check_deploy(CAUTERWEB_HTTPS="false")
    assert [w for w in TRANSPORT_WARNINGS if w in output] == list(TRANSPORT_WARNINGS), output


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "True True True 31536000 False None"),
        ({"DEBUG": "true"}, "False False False 0 False None"),
        (
            {"CAUTERWEB_PROXY_SSL_HEADER": "true", "CAUTERWEB_HSTS_SECONDS": "600"},
            "True True True 600 False ('HTTP_X_FORWARDED_PROTO', 'https')",
        ),
        ({"CAUTERWEB_HSTS_INCLUDE_SUBDOMAINS": "yes"}, "True True True 31536000 True None"),
    ],
)
def test_transport_settings_follow_the_environment(env, expected):
    result = run(
        "import django; django.setup(); from django.conf import settings as s;"
        "print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
        " s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_PROXY_SSL_HEADER)",
        **env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


@pytest.mark.parametrize("name", ["CAUTERWEB_HTTPS", "CAUTERWEB_PROXY_SSL_HEADER"])
def test_a_bad_switch_stops_start_up_naming_it(name):
    result = run("import django; django.setup()", **{name: "perhaps"})
    assert result.returncode != 0
    assert name in result.stderr


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/api/v1/openapi.json", "/api/v1/docs"])
def test_every_response_carries_the_content_security_policy(client, path):
    policy = client.get(path)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


@pytest.mark.django_db
def test_behind_a_tls_proxy_a_forwarded_https_request_is_not_redirected(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/accounts/login/").status_code == 301
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    response = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200


def test_every_logger_reaches_stderr_once_with_the_request_id_field():
    result = run(
        "import django, logging; django.setup();"
        "logging.getLogger('kombu.connection').error('broker gone');"
        "logging.getLogger('lifecycle.services').warning('kick failed');"
        "logging.getLogger('django.request').error('Internal Server Error: /x');"
        "logging.getLogger('some.library').info('chatter')"
    )
    lines = result.stderr.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "ERROR kombu.connection [-]: broker gone",
        "WARNING lifecycle.services [-]: kick failed",
        "ERROR django.request [-]: Internal Server Error: /x",
    ], result.stderr
