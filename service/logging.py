"""structlog to stderr: JSON when stderr is not a terminal; never message content or secrets."""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info") -> None:
    """Route structlog and the stdlib loggers to stderr, one event per line."""
    json_output = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Library loggers (mcp, aioimaplib, aiohttp) may echo protocol text; keep them quiet.
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(name)s %(levelname)s %(message)s"
    )
    for noisy in ("aioimaplib", "mcp", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
