"""The one NinjaAPI of the project, versioned under /api/v1: one router module per resource,
one error shape and one way to read a body (protocol.py), one cursor format (lifecycle/cursor.py).

Each handler makes one call into the domain (lifecycle's or replay's services and
selectors): no transaction, journal write or ORM query here, only the JSON shapes
(presenters.py). There is no endpoint that promotes a rule and no input carries a rule state:
only the engine promotes (semantics §3)."""

from ninja import NinjaAPI

from . import (
    candidates,
    journal,
    packs,
    protocol,
    replay,
    reports,
    review,
    rounds,
    rules,
    scopes,
    traces,
    trajectories,
)

# The docs page (/api/v1/docs) is served from ninja's own static files, never a CDN, because
# "ninja" is in INSTALLED_APPS.
api = NinjaAPI(
    title="CauterWeb API",
    version="1",
    description="Corpus, reports, candidates, the rule tool, rounds, journal and packs.",
    urls_namespace="api-v1",
    parser=protocol.StrictParser(),
)
for module in (
    trajectories,
    traces,
    reports,
    candidates,
    rules,
    journal,
    rounds,
    scopes,
    packs,
    review,
):
    api.add_router("/", module.router)
api.add_router("/replay/", replay.router)
protocol.install(api)
