"""structlog to stderr: JSON when stderr is not a terminal; never message content or secrets.

Library records (mcp, aiohttp, asyncio, warnings) go through the same renderer, so every line on
stderr is one JSON object; an exception becomes its type and its frames, never its message text
(which may quote a request) and never a multi-line traceback.
"""

from __future__ import annotations

import logging
import sys
import traceback
from types import TracebackType

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger


def exception_fields(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """Replace exc_info by the exception's type and stack frames (no message text)."""
    info = event.pop("exc_info", None)
    if info is True:
        info = sys.exc_info()
    elif isinstance(info, BaseException):
        info = (type(info), info, info.__traceback__)
    if isinstance(info, tuple) and info[0] is not None:
        error_type: type[BaseException] = info[0]
        tb: TracebackType | None = info[2]
        event["error_type"] = error_type.__name__
        event["stack"] = "".join(traceback.format_tb(tb))
    return event


def configure_logging(level: str = "info") -> None:
    """Route structlog and the stdlib loggers to stderr, one event per line."""
    json_output = not sys.stderr.isatty()
    renderer: Processor = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    )
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[*shared, exception_fields, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                exception_fields,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    sys.unraisablehook = _log_unraisable
    # Library loggers (mcp, aioimaplib, aiohttp) may echo protocol text; keep them quiet.
    for noisy in ("aioimaplib", "mcp", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


def _log_uncaught(
    kind: type[BaseException], error: BaseException, tb: TracebackType | None
) -> None:
    structlog.get_logger("angelos").critical("uncaught_exception", exc_info=(kind, error, tb))


def _log_unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    error = unraisable.exc_value
    structlog.get_logger("angelos").error(
        "unraisable_exception",
        exc_info=(unraisable.exc_type, error, unraisable.exc_traceback) if error else None,
    )
