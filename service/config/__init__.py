"""Configuration from environment variables: frozen, validated, secret-free in every repr."""

from service.config._load import check_config_lines, describe, load_config
from service.config._model import (
    Config,
    Gates,
    HttpAuthConfig,
    LocalPrincipal,
    MailConfig,
    StoreConfig,
)
from service.config._rules import SCOPE_ORDER

__all__ = [
    "SCOPE_ORDER",
    "Config",
    "Gates",
    "HttpAuthConfig",
    "LocalPrincipal",
    "MailConfig",
    "StoreConfig",
    "check_config_lines",
    "describe",
    "load_config",
]
