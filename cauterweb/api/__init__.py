"""The one NinjaAPI of the project, versioned under /api/v1: one router module per resource,
one error shape (errors.py), one cursor format (cursor.py).

Each handler makes one call into the domain (lifecycle, replay, or domain.py here until those
steps move into lifecycle's services and selectors). There is no endpoint that promotes a rule
and no input carries a rule state: only the engine promotes (semantics §3)."""

from ninja import NinjaAPI

from . import (
    bodies,
    candidates,
    errors,
    journal,
    packs,
    replay,
    reports,
    rounds,
    rules,
    scopes,
    trajectories,
)

# The docs page (/api/v1/docs) is served from ninja's own static files, never a CDN, because
# "ninja" is in INSTALLED_APPS.
api = NinjaAPI(
    title="CauterWeb API",
    version="1",
    description="Corpus, reports, candidates, the rule tool, rounds, journal and packs.",
    urls_namespace="api-v1",
    parser=bodies.StrictParser(),
)
for module in (trajectories, reports, candidates, rules, journal, rounds, scopes, packs):
    api.add_router("/", module.router)
api.add_router("/replay/", replay.router)
errors.install(api)
