"""The corpus over HTTP (semantics §2): import trajectories with import_corpus's semantics."""

import json

from ninja import Router

from lifecycle.inputs import TrajectoryIn
from lifecycle.services.corpus import import_corpus

from . import protocol
from .protocol import ERRORS, WRITE, request_actor
from .schemas import ImportOut

router = Router(tags=["corpus"])


@router.post(
    "/trajectories",
    operation_id="importTrajectories",
    auth=WRITE,
    response={200: ImportOut, **ERRORS},
    openapi_extra=protocol.batch_body(TrajectoryIn, "trajectory (semantics §2)"),
    summary="Import corpus trajectories (import_corpus semantics)",
)
def post_trajectories(request, replace: bool = False):
    """Atomic and idempotent (semantics §2): same ids with the same content change nothing;
    changed content is a conflict unless `replace=true`. A JSON Lines body is streamed: read
    line by line as the import goes, so its size is not limited, only each line's."""
    if protocol.is_jsonl(request):
        lines = protocol.streamed_lines(request)
    else:
        lines = [json.dumps(item) for item in protocol.json_items(request)]
    # With the token as actor, import_corpus journals the change in the import's transaction.
    result = import_corpus(lines, replace=replace, actor=request_actor(request), keep_ids=True)
    return {**result.as_dict(), "ids": result.ids}
