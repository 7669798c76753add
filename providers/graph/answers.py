"""What a Graph answer means for the caller: the body to use, or the error it can conclude from.

Reads and writes conclude differently from the same status: a failed read changed nothing, so
it is unavailable; a write Graph may have applied (a 5xx, a lost answer) is `outcome_unknown`
with the caller's outcome attached, and one Graph answered 4xx provably was not applied.
"""

from __future__ import annotations

from typing import Final

from providers.graph.http import MAX_JSON_BYTES, Answer, ExchangeLost, GraphHttp, Kind
from providers.graph.wire import error_code
from schemas import errors

TOKEN_REFUSED: Final = (
    "Microsoft Graph refused the access token; if this persists, run `angelos microsoft-auth` "
    "and set MICROSOFT_REFRESH_TOKEN"
)


async def get(
    http: GraphHttp, url: str, params: dict[str, str] | None = None, limit: int = MAX_JSON_BYTES
) -> Answer:
    """GET under the read rules; no answer at all is unavailable (a read changes nothing)."""
    try:
        return await http.request(Kind.READ, "GET", url, params=params, limit=limit)
    except ExchangeLost as lost:
        cause = lost.cause
    raise errors.ServiceUnavailable(f"Microsoft Graph could not be reached ({cause})")


def read_body(answer: Answer, ok: int = 200) -> bytes:
    """The body of a successful read, or the error a failed read means (nothing changed)."""
    if answer.status == ok and not answer.cut:
        return answer.body
    raise read_failure(answer)


def read_failure(answer: Answer) -> errors.MailError:
    """The error a read (or a write Graph refused before acting) concludes from its answer."""
    status = answer.status
    if answer.cut and 200 <= status < 300:
        return errors.SafetyLimit("Microsoft Graph's answer exceeded the size limit")
    if status == 404:
        return errors.NotFound("the message or folder was not found in Microsoft Graph")
    if status == 401:
        return errors.ServiceUnavailable(TOKEN_REFUSED)
    if status == 403:
        return errors.ServiceUnavailable(
            "Microsoft Graph denied access; the app needs the delegated permissions User.Read, "
            "Mail.ReadWrite and Mail.Send"
        )
    if status == 429:
        return errors.ServiceUnavailable("Microsoft Graph is throttling this mailbox; try later")
    code = error_code(answer.body) if 400 <= status < 500 else ""
    detail = f" ({code})" if code else ""
    return errors.ServiceUnavailable(f"Microsoft Graph answered HTTP {status}{detail}")


def applied_or_not(answer: Answer, ok: int) -> bool:
    """Tell whether a write's answer proves it applied (True) or proves it did not (False).

    Raises OutcomeUnknown (no outcome attached) when the answer proves neither.
    """
    if answer.status == ok and not answer.cut:
        return True
    if 400 <= answer.status < 500:
        return False
    raise errors.OutcomeUnknown(
        f"Microsoft Graph answered HTTP {answer.status}; the change may have been applied"
    )
