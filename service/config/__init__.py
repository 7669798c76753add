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
    GraphAccount,
    HttpAuthConfig,
    LocalPrincipal,
    MailConfig,
    OAuthLogin,
    StoreConfig,
)
from service.config._redirect_uris import (
    callback_key,
    callback_problem,
    kind_of,
    redirect_uri_matches,
)
from service.config._report import check_config_lines, describe, ledger_problems
from service.config._urls import parse_public_https_url
from service.config._values import has_control, utf8_size

__all__ = [
    "CHATGPT_CLIENT_ID",
    "Client",
    "Config",
    "EnvFileInfo",
    "FirstPartyConfig",
    "Gates",
    "GraphAccount",
    "HttpAuthConfig",
    "LocalPrincipal",
    "MailConfig",
    "OAuthLogin",
    "StoreConfig",
    "callback_key",
    "callback_problem",
    "check_config_lines",
    "describe",
    "has_control",
    "kind_of",
    "ledger_problems",
    "load_config",
    "parse_public_https_url",
    "redirect_uri_matches",
    "utf8_size",
    "with_env_file",
]
