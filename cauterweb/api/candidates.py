"""Candidate rules from agents and extractors (semantics §3)."""

from ninja import Router

from lifecycle.inputs import CandidateIn
from lifecycle.services.candidates import candidates_record

from . import protocol
from .presenters import rule_out
from .protocol import ERRORS, WRITE, request_actor
from .schemas import CandidatesOut

router = Router(tags=["rules"])


@router.post(
    "/candidates",
    operation_id="recordCandidates",
    auth=WRITE,
    response={200: CandidatesOut, **ERRORS},
    openapi_extra=protocol.batch_body(CandidateIn, "candidate rule (semantics §3)"),
    summary="Record candidate rules; each is returned with its forward-trial baseline",
)
def post_candidates(request):
    result, rules = candidates_record(protocol.rows(request), actor=request_actor(request))
    return {**result.as_dict(), "ids": result.ids, "candidates": [rule_out(r) for r in rules]}
