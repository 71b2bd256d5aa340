"""The one NinjaAPI of the project, versioned under /api/v1; each app adds its routers here."""

from ninja import NinjaAPI

from lifecycle.api import install as install_lifecycle_api

from .api_traces import install as install_traces_api

# The docs page (/api/v1/docs) is served from ninja's own static files, never a CDN, because
# "ninja" is in INSTALLED_APPS.
api = NinjaAPI(
    title="CauterWeb API",
    version="1",
    description="Corpus, reports, candidates, the rule tool, rounds, journal and packs.",
    urls_namespace="api-v1",
)
install_lifecycle_api(api)
install_traces_api(api)

api.add_router("/replay/", "replay.api.router")
