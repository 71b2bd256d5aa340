"""One settings module, driven by the environment (semantics §16).

With no DATABASE_URL and no CELERY_BROKER_URL the app runs on an SQLite file under var/ and
executes Celery tasks eagerly, so a fresh clone can run the demo with one command. A value that
does not parse stops start-up with a message naming the variable.
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CAUTERWEB_VAR_DIR", BASE_DIR / "var"))


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false)")


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value != value or value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be a number ≥ {minimum}")
    return value


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be ≥ {minimum}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} must be one of: {', '.join(choices)}")
    return value


def env_callable_or_url(name: str) -> str:
    """A dotted `package.module:function` path or an http(s):// URL (semantics §14); checked here,
    imported lazily by the engine so a typo fails at start-up and not in the middle of a round."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return ""
    if raw.startswith(("http://", "https://")):
        return raw
    module, sep, attr = raw.partition(":")
    if (
        not sep
        or not module
        or not attr
        or not all(part.isidentifier() for part in module.split(".") + attr.split("."))
    ):
        raise ImproperlyConfigured(
            f"{name}={raw!r} must be a dotted path 'package.module:function' or an http(s):// URL"
        )
    return raw


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    # Never a committed secret: without SECRET_KEY, a random key is made once and kept in var/
    # (git-ignored), so the web process and the Celery workers of one machine agree on it.
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(os.urandom(32).hex())
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()
ALLOWED_HOSTS = [
    h.strip() for h in env_str("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in env_str("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    # ninja's docs page and its Swagger UI assets, served locally (no CDN).
    "ninja",
    "lifecycle",
    "replay",
    "dashboard",
    # For its management commands (`mcp`); it has no models.
    "cauterweb",
]

MIDDLEWARE = [
    "cauterweb.middleware.request_id_middleware",
    "cauterweb.api.protocol.json_error_middleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "cauterweb.middleware.chunked_body_middleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "cauterweb.middleware.htmx_push_once_middleware",
    "cauterweb.middleware.refuse_nul_middleware",
]

ROOT_URLCONF = "cauterweb.urls"
WSGI_APPLICATION = "cauterweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context_processors.review",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    try:
        # Health checks: a persistent connection that was cut (database restarted, backend
        # terminated) is replaced before a request uses it, instead of answering 503 once.
        DATABASES = {
            "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
        }
    except Exception as exc:  # dj-database-url raises several types for a bad URL
        raise ImproperlyConfigured(f"DATABASE_URL could not be parsed: {exc}") from None
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "cauterweb.sqlite3",
            # Rounds, reports and the dashboard write at the same time in the demo: wait for the
            # write lock instead of failing with "database is locked".
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# WhiteNoise scans STATIC_ROOT at start-up and warns when it is missing (before collectstatic).
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # In production run `collectstatic` and set CAUTERWEB_MANIFEST_STATIC=true for hashed,
        # compressed, far-future-cached files; the default serves straight from static/.
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if env_bool("CAUTERWEB_MANIFEST_STATIC", False)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not env_bool("CAUTERWEB_MANIFEST_STATIC", False)

# API request bodies larger than this are refused with 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("CAUTERWEB_MAX_BODY_BYTES", 50 * 1024 * 1024, minimum=1024)

# --- Celery -------------------------------------------------------------------------------------
# The app the domain enqueues through, created on a process's first enqueue (as ROOT_URLCONF
# names the URLs: lifecycle and replay do not import the project's wiring).
CAUTERWEB_CELERY_APP = "cauterweb.celery.app_with_tasks"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
# No broker configured: run tasks in-process so the embedded default needs no services.
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", not CELERY_BROKER_URL)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A request must never hang on a broker that is down (semantics §9.1): fail fast, the periodic
# schedule picks the work up later.
# Every socket call to the broker gives up after 2 s (a hung Redis — paused, swapping, cut off
# — costs a request at most that, then the kick is journaled as failed and the report stands).
# A message a worker took and never acknowledged (it died) goes back to the queue after the
# visibility timeout: longer than the slowest legal replay, so a running replay task is not
# delivered twice in the normal case (twice is harmless: its claim decides, docs/deploy.md).
BROKER_TIMEOUT_S = 2.0
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
    "socket_timeout": BROKER_TIMEOUT_S,
    "socket_connect_timeout": BROKER_TIMEOUT_S,
    "visibility_timeout": 60
    + env_float("CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S", 0.0)
    + env_float("CAUTERWEB_REPLAY_TIMEOUT_S", 300.0),
}
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_TIMEOUT_S
# A publish that timed out is not retried (Celery's default retries it three times: 10 s on a
# hung broker); the kick is journaled as failed and the next one, or beat's, goes through.
CELERY_TASK_PUBLISH_RETRY = False
CELERY_REDIS_SOCKET_TIMEOUT = BROKER_TIMEOUT_S
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = BROKER_TIMEOUT_S
# One message reserved per worker process at a time: a worker that dies takes no queue of
# fetched replays with it (each would wait out the visibility timeout).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes a worker's database connections before and after every task
# unless this is set, and a replay task then pays a new PostgreSQL backend each time. Workers
# keep theirs for CONN_MAX_AGE; cauterweb/celery.py drops one that broke, as Django does
# between requests.
CELERY_DB_REUSE_MAX = 1000
CELERY_TIMEZONE = "UTC"
CAUTERWEB_ROUND_SCHEDULE_S = env_float("CAUTERWEB_ROUND_SCHEDULE_S", 60.0, minimum=1.0)
CAUTERWEB_WEBHOOK_SWEEP_S = env_float("CAUTERWEB_WEBHOOK_SWEEP_S", 60.0, minimum=1.0)
# Seconds a webhook receiver has to answer one attempt (docs/webhooks.md).
CAUTERWEB_WEBHOOK_TIMEOUT_S = env_float("CAUTERWEB_WEBHOOK_TIMEOUT_S", 10.0, minimum=0.5)
CELERY_BEAT_SCHEDULE = {
    "validation-round": {
        "task": "replay.tasks.round_run_task",
        "schedule": CAUTERWEB_ROUND_SCHEDULE_S,
    },
    # Webhook retries that are due, and deliveries a broker outage left behind (docs/webhooks.md).
    "webhook-sweep": {
        "task": "lifecycle.tasks.webhooks_sweep_task",
        "schedule": CAUTERWEB_WEBHOOK_SWEEP_S,
    },
}
# Where the single-flight round lock lives (semantics §9.1): Redis when the broker is Redis,
# otherwise a row in the database.
CAUTERWEB_LOCK_URL = env_str(
    "CAUTERWEB_LOCK_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
)

# How long an API token found live is trusted without reading it again: a revocation made in
# another process (the command line, another worker) is obeyed within this many seconds; one
# made in the same process at once. 0 reads the token on every request.
CAUTERWEB_TOKEN_CACHE_SECONDS = env_float("CAUTERWEB_TOKEN_CACHE_SECONDS", 2.0)

# Process-local caches: `tokens` holds the live API tokens for the seconds above
# (lifecycle/services/tokens.py).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "tokens": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "cauterweb-live-tokens",
        "OPTIONS": {"MAX_ENTRIES": 1024},
    },
}

# --- Engine knobs (semantics §16) -------------------------------------------------------------------
CAUTERWEB_RULE_PROMOTE_MARGIN = env_float("CAUTERWEB_RULE_PROMOTE_MARGIN", 0.05)
CAUTERWEB_RULE_REGRESS_MARGIN = env_float("CAUTERWEB_RULE_REGRESS_MARGIN", 0.05)
CAUTERWEB_RULE_TRIAL_MIN_SESSIONS = env_int("CAUTERWEB_RULE_TRIAL_MIN_SESSIONS", 5, minimum=1)
CAUTERWEB_BASELINE_WINDOW = env_int("CAUTERWEB_BASELINE_WINDOW", 200, minimum=1)
CAUTERWEB_MAX_FAILING_CASES = env_int("CAUTERWEB_MAX_FAILING_CASES", 3, minimum=1)
CAUTERWEB_MAX_PROTECTED_WINS = env_int("CAUTERWEB_MAX_PROTECTED_WINS", 2, minimum=0)
CAUTERWEB_MAX_REPLAY_ATTEMPTS = env_int("CAUTERWEB_MAX_REPLAY_ATTEMPTS", 3, minimum=1)
CAUTERWEB_REPLAY_TIMEOUT_S = env_float("CAUTERWEB_REPLAY_TIMEOUT_S", 300.0)
CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = env_float("CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S", 0.0)
CAUTERWEB_VALIDATION_ROUND_BUDGET_S = env_float("CAUTERWEB_VALIDATION_ROUND_BUDGET_S", 0.0)
CAUTERWEB_REPLAY_BACKEND = env_callable_or_url("CAUTERWEB_REPLAY_BACKEND")
CAUTERWEB_VERIFIER = env_callable_or_url("CAUTERWEB_VERIFIER")
# paired: treatment and control arms, repeated, decided statistically (semantics §17);
# single: one replay per case against the recorded original (semantics §7).
CAUTERWEB_REPLAY_DESIGN = env_choice("CAUTERWEB_REPLAY_DESIGN", "paired", ("paired", "single"))
# Replays per case and arm in all, in batches of 4: looks after 4, 8 and 10 (semantics §21.3).
CAUTERWEB_REPLAY_MAX_REPEATS = env_int("CAUTERWEB_REPLAY_MAX_REPEATS", 10, minimum=1)
# Looks (completed batches) one round gives a paired candidate; an undecided one waits for the
# next round, so a doubtful candidate cannot hold the others back (semantics §17.3).
CAUTERWEB_REPLAY_LOOKS_PER_ROUND = env_int("CAUTERWEB_REPLAY_LOOKS_PER_ROUND", 1, minimum=1)
CAUTERWEB_REPLAY_ALPHA = env_float("CAUTERWEB_REPLAY_ALPHA", 0.05)
if not 0 < CAUTERWEB_REPLAY_ALPHA < 1:
    raise ImproperlyConfigured(
        f"CAUTERWEB_REPLAY_ALPHA={CAUTERWEB_REPLAY_ALPHA!r} must be between 0 and 1"
    )
# Above 0 (the default 0.02): a look before the last retires only when an exact test rules out
# a lift of 0.2 at this level in all (semantics §21.3); 0: when its effect estimate is below
# zero (the sign) — fewer replays a rule, more helpful rules lost.
CAUTERWEB_REPLAY_FUTILITY_BETA = env_float("CAUTERWEB_REPLAY_FUTILITY_BETA", 0.02)
if not 0 <= CAUTERWEB_REPLAY_FUTILITY_BETA < 1:
    raise ImproperlyConfigured(
        f"CAUTERWEB_REPLAY_FUTILITY_BETA={CAUTERWEB_REPLAY_FUTILITY_BETA!r} must be at least 0"
        " and below 1"
    )
# randomized: forward trials are randomized experiments on the sessions that read a candidate's
# scope, decided by an always-valid sequential test (semantics §20); baseline: §8 as written.
CAUTERWEB_TRIAL_DESIGN = env_choice(
    "CAUTERWEB_TRIAL_DESIGN", "randomized", ("randomized", "baseline")
)
# Share of sessions assigned to a candidate's treatment arm (semantics §20.1).
CAUTERWEB_TRIAL_ALLOCATION = env_float("CAUTERWEB_TRIAL_ALLOCATION", 0.5)
if not 0 < CAUTERWEB_TRIAL_ALLOCATION < 1:
    raise ImproperlyConfigured(
        f"CAUTERWEB_TRIAL_ALLOCATION={CAUTERWEB_TRIAL_ALLOCATION!r} must be between 0 and 1"
    )
CAUTERWEB_TRIAL_ALPHA = env_float("CAUTERWEB_TRIAL_ALPHA", 0.05)
if not 0 < CAUTERWEB_TRIAL_ALPHA < 0.5:
    raise ImproperlyConfigured(
        f"CAUTERWEB_TRIAL_ALPHA={CAUTERWEB_TRIAL_ALPHA!r} must be between 0 and 0.5"
    )
# Sessions with an outcome, both arms, after which an undecided trial retires (semantics §20.4).
CAUTERWEB_TRIAL_MAX_SESSIONS = env_int("CAUTERWEB_TRIAL_MAX_SESSIONS", 400, minimum=2)
# How many replays may run at once (semantics §18): Celery tasks across the workers when a
# broker is configured, threads of one bounded pool in the embedded default.
CAUTERWEB_REPLAY_CONCURRENCY = env_int("CAUTERWEB_REPLAY_CONCURRENCY", 1, minimum=1)
# With a broker: replays per Celery task at most. The replays a round sends together go as
# batches, each claimed, stored and signalled in one statement or message and run at once on
# its worker's replay threads (docs/semantics.md#s18-batches); 1 is a task per replay.
CAUTERWEB_REPLAY_BATCH = env_int("CAUTERWEB_REPLAY_BATCH", 8, minimum=1)
# Key for the HMAC-SHA256 signature of HTTP replay requests (semantics §14).
CAUTERWEB_REPLAY_HMAC_KEY = env_str("CAUTERWEB_REPLAY_HMAC_KEY", SECRET_KEY)
# Base URL the HTTP harness uses to reach our rule tool and started signal.
CAUTERWEB_PUBLIC_URL = env_str("CAUTERWEB_PUBLIC_URL", "http://127.0.0.1:8000")

# The metric registry (semantics §1) is a table; this seeds it. (name, tier, higher_is_better, aliases)
CAUTERWEB_DEFAULT_METRICS = [
    ("outcome_correct", 0, True, []),
    ("task_completion", 1, True, []),
    ("coherence", 1, True, []),
    ("tool_correctness", 2, True, []),
    ("argument_correctness", 2, True, []),
    ("plan_adherence", 3, True, []),
    ("plan_quality", 3, True, []),
    ("step_efficiency", 3, True, []),
]

# Optional LLM extractor: an OpenAI-compatible chat-completions endpoint.
CAUTERWEB_LLM_BASE_URL = env_str("CAUTERWEB_LLM_BASE_URL")
CAUTERWEB_LLM_MODEL = env_str("CAUTERWEB_LLM_MODEL")
CAUTERWEB_LLM_API_KEY = env_str("CAUTERWEB_LLM_API_KEY")

# Every record carries the request id; unhandled errors (django.request) go to stderr whatever
# DEBUG says, so a 500 in production always leaves its traceback somewhere.
_LOG_LEVEL = env_str("CAUTERWEB_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "cauterweb.middleware.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"}
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "plain",
            "filters": ["request_id"],
        }
    },
    "loggers": {
        **{
            name: {"handlers": ["console"], "level": _LOG_LEVEL, "propagate": False}
            for name in ("cauterweb", "replay", "lifecycle", "dashboard")
        },
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
    # Everything else that warns or fails (Celery, kombu, psycopg, django.security, a library
    # we call) reaches stderr too, with the request id when it happens inside a request.
    "root": {"handlers": ["console"], "level": "WARNING"},
}

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"

# --- Transport security and the Content-Security-Policy -------------------------------------
# Safe by default in production: with DEBUG off the app answers HTTPS only (plain HTTP is
# redirected), its cookies are Secure and browsers are told to keep to HTTPS (HSTS), so
# `manage.py check --deploy` has nothing to say about them. CAUTERWEB_HTTPS=false serves plain
# HTTP (a closed network, or a local run without DEBUG). Behind a TLS proxy, set
# CAUTERWEB_PROXY_SSL_HEADER=true so a request the proxy forwarded with X-Forwarded-Proto: https
# counts as secure — only when the proxy sets that header and strips it from clients.
CAUTERWEB_HTTPS = env_bool("CAUTERWEB_HTTPS", not DEBUG)
SECURE_SSL_REDIRECT = CAUTERWEB_HTTPS
SESSION_COOKIE_SECURE = CAUTERWEB_HTTPS
CSRF_COOKIE_SECURE = CAUTERWEB_HTTPS
SECURE_HSTS_SECONDS = env_int("CAUTERWEB_HSTS_SECONDS", 365 * 24 * 3600 if CAUTERWEB_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CAUTERWEB_HSTS_INCLUDE_SUBDOMAINS", False)
if env_bool("CAUTERWEB_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Scripts and styles come from our own static files only (htmx, Plotly, charts.js, app.css):
# no inline script, no eval, no CDN. Plotly sets styles through the DOM, which style-src does
# not govern; it needs data: images for its mode-bar icons and blob: for image downloads.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
