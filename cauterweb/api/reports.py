"""Live session reports (semantics §2): each batch kicks a validation round."""

from ninja import Router

from lifecycle.inputs import ReportIn
from lifecycle.services.reports import reports_ingest

from . import protocol
from .protocol import ERRORS, WRITE, request_actor
from .schemas import ImportOut

router = Router(tags=["reports"])


@router.post(
    "/reports",
    operation_id="postReports",
    auth=WRITE,
    response={200: ImportOut, **ERRORS},
    openapi_extra=protocol.batch_body(ReportIn, "session report (semantics §2)"),
    summary="Post live session reports; a validation round is kicked",
)
def post_reports(request):
    result = reports_ingest(protocol.rows(request), actor=request_actor(request).name)
    return {**result.as_dict(), "ids": result.ids}
