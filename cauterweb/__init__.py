"""The project's wiring. Its Celery app (`cauterweb.celery.app`) is created when a process
first needs it — a worker (`celery -A cauterweb`), or the first follow-up a web or command
process enqueues (lifecycle/follow_ups.py) — not when Django starts."""


def __getattr__(name: str):
    # `cauterweb.celery_app`, the name Celery's Django guide gives it, without importing
    # Celery with the package.
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
