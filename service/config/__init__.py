"""Configuration from environment variables: frozen, validated, secret-free in every repr."""

from service.config._env_file import with_env_file
from service.config._first_party import CHATGPT_CLIENT_ID
from service.config._load import load_config
from service.config._model import (
    Client,
    Config,
    EnvFileInfo,
    FirstPartyConfig,
    Gates,
    HttpAuthConfig,
    LocalPrincipal,
    MailConfig,
    StoreConfig,
)
from service.config._report import check_config_lines, describe

__all__ = [
    "CHATGPT_CLIENT_ID",
    "Client",
    "Config",
    "EnvFileInfo",
    "FirstPartyConfig",
    "Gates",
    "HttpAuthConfig",
    "LocalPrincipal",
    "MailConfig",
    "StoreConfig",
    "check_config_lines",
    "describe",
    "load_config",
    "with_env_file",
]
