"""Referee the Graph contract double's exchanges with msgraph-sdk's own models and request builders.

Run with tests/graph_sdk/venv/bin/python (scripts/bootstrap makes it): `check.py EXCHANGES.jsonl`,
one exchange a line as tests/support/graph_double/faults.py's Exchange.to_json writes it. For
each exchange: (a) a JSON answer is parsed with the msgraph model class its `model` names; any
member that lands in `additional_data` (at any depth) other than an `@odata.` annotation is a
problem, and so is any member that does not come back the same when the SDK writes the parsed
object again (a wrong type parses to nothing). (b) The same call is built with the SDK's request
builders (GraphServiceClient without a network: an anonymous auth provider, nothing is sent);
its method, path, query options and JSON body must be what was sent. The SDK writes /me as
/users/me-token-to-replace, which its own middleware turns back into /me before sending; so does
this check. Prints one JSON line per exchange, {"index", "ok", "problems"}, then a summary line;
exits 0 only when every exchange is ok.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import re
import sys
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from kiota_abstractions.authentication import AnonymousAuthenticationProvider
from kiota_abstractions.base_request_configuration import RequestConfiguration
from kiota_abstractions.request_information import RequestInformation
from kiota_abstractions.serialization import Parsable
from kiota_serialization_json.json_parse_node_factory import JsonParseNodeFactory
from kiota_serialization_json.json_serialization_writer_factory import (
    JsonSerializationWriterFactory,
)
from msgraph import GraphRequestAdapter, GraphServiceClient
from msgraph.generated.models.mail_folder import MailFolder
from msgraph.generated.models.message import Message
from msgraph.generated.users.item.messages.item.copy.copy_post_request_body import (
    CopyPostRequestBody,
)
from msgraph.generated.users.item.messages.item.move.move_post_request_body import (
    MovePostRequestBody,
)
from msgraph.generated.users.item.send_mail.send_mail_post_request_body import (
    SendMailPostRequestBody,
)

BASE = "https://graph.microsoft.com/v1.0"
ME_TOKEN = "/users/me-token-to-replace"
SPECIAL_MODELS = {"ODataError": "msgraph.generated.models.o_data_errors.o_data_error"}
# Our query option → the SDK's QueryParameters field, and how its value is typed there.
OPTIONS = {
    "$top": ("top", int),
    "$skip": ("skip", int),
    "$select": ("select", lambda v: v.split(",")),
    "$orderby": ("orderby", lambda v: v.split(",")),
    "$filter": ("filter", str),
}
FOLDER = r"/me/mailFolders/(?P<folder>[^/]+)"
MESSAGE = r"/me/messages/(?P<message>[^/]+)"


def model_class(name: str) -> type[Parsable]:
    """The msgraph model class of that name (Message → msgraph.generated.models.message)."""
    module = (
        SPECIAL_MODELS.get(name)
        or "msgraph.generated.models." + re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    )
    cls: type[Parsable] = getattr(importlib.import_module(module), name)
    return cls


def unknown_members(value: Any, where: str) -> list[str]:
    """Every non-annotation key in additional_data, at any depth of a parsed object."""
    found: list[str] = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            found += unknown_members(item, f"{where}[{i}]")
    elif isinstance(value, Parsable) and dataclasses.is_dataclass(value):
        for key in getattr(value, "additional_data", None) or {}:
            if not key.startswith("@odata."):
                found.append(f"{where}: {key!r} is no member of {type(value).__name__}")
        for f in dataclasses.fields(value):
            if f.name not in ("backing_store", "additional_data"):
                found += unknown_members(getattr(value, f.name, None), f"{where}.{f.name}")
    return found


def _same_scalar(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, str) and isinstance(b, str):
        try:
            return datetime.fromisoformat(a) == datetime.fromisoformat(b)
        except ValueError:
            return False
    return False


def differences(sent: Any, back: Any, where: str) -> list[str]:
    """Where `back` (the SDK's rewrite) differs from `sent`, @odata annotations and nulls aside."""
    if isinstance(sent, dict) and isinstance(back, dict):
        found: list[str] = []
        for key in sorted(set(sent) | set(back)):
            if key.startswith("@odata."):
                continue
            a, b = sent.get(key), back.get(key)
            if a is None and b is None:
                continue
            found += differences(a, b, f"{where}.{key}")
        return found
    if isinstance(sent, list) and isinstance(back, list) and len(sent) == len(back):
        return [
            p
            for i, (a, b) in enumerate(zip(sent, back, strict=True))
            for p in differences(a, b, f"{where}[{i}]")
        ]
    if (
        isinstance(sent, (dict, list))
        or isinstance(back, (dict, list))
        or not _same_scalar(sent, back)
    ):
        return [f"{where}: sent {sent!r}, the SDK reads it as {back!r}"]
    return []


def parse(body: bytes, cls: type[Parsable]) -> Any:
    """`body` parsed into `cls` by kiota's JSON parse node."""
    node = JsonParseNodeFactory().get_root_parse_node("application/json", body)
    return node.get_object_value(cls)


def rewrite(value: Parsable) -> Any:
    """The JSON the SDK writes for a parsed object."""
    writer = JsonSerializationWriterFactory().get_serialization_writer("application/json")
    writer.write_object_value(None, value)
    return json.loads(writer.get_serialized_content())


def check_response(exchange: dict[str, Any]) -> list[str]:
    """(a): the JSON answer against the model class the double said it is."""
    body = base64.b64decode(exchange["response_body"])
    cls = model_class(exchange["model"])
    try:
        sent = json.loads(body)
        parsed = parse(body, cls)
    except Exception as e:  # whatever kiota raises on a body it cannot read
        return [f"response: {exchange['model']} does not parse: {e!r}"]
    problems = unknown_members(parsed, f"response {exchange['model']}")
    return problems + differences(sent, rewrite(parsed), "response")


def _query_parameters(builder: Any, query: list[list[str]]) -> tuple[Any, list[str]]:
    cls = next(
        (getattr(type(builder), n) for n in dir(type(builder)) if n.endswith("GetQueryParameters")),
        None,
    )
    values: dict[str, Any] = {}
    problems = []
    for name, value in query:
        if name not in OPTIONS or cls is None or OPTIONS[name][0] not in cls.__dataclass_fields__:
            problems.append(f"request: the SDK has no query option {name!r} here")
            continue
        field, typed = OPTIONS[name]
        values[field] = typed(value)
    return (RequestConfiguration(query_parameters=cls(**values)) if cls else None), problems


def build(client: GraphServiceClient, exchange: dict[str, Any], body: Any) -> Any:
    """The SDK's RequestInformation for the same call (a list of problems when it has none)."""
    method, path = exchange["method"], exchange["path"]
    route = path[len("/v1.0") :] if path.startswith("/v1.0/") else None
    me = client.me
    simple: list[tuple[str, str, Any]] = [
        ("GET", r"/me", lambda m: me),
        ("GET", r"/me/mailFolders", lambda m: me.mail_folders),
        ("GET", FOLDER, lambda m: me.mail_folders.by_mail_folder_id(m["folder"])),
        ("GET", FOLDER + "/childFolders", lambda m: _folder(me, m).child_folders),
        ("GET", FOLDER + "/messages", lambda m: _folder(me, m).messages),
        ("GET", MESSAGE, lambda m: me.messages.by_message_id(m["message"])),
        ("GET", MESSAGE + r"/\$value", lambda m: me.messages.by_message_id(m["message"]).content),
    ]
    for verb, pattern, pick in simple:
        m = re.fullmatch(pattern, route or "")
        if m and verb == method:
            builder = pick(m)
            config, problems = _query_parameters(builder, exchange["query"])
            return problems or builder.to_get_request_information(config)
    if exchange["query"]:
        return ["request: query options on a request that takes none"]
    bodies: list[tuple[str, str, Any]] = [
        ("POST", r"/me/mailFolders", lambda m: me.mail_folders.to_post_request_information(body)),
        (
            "POST",
            FOLDER + "/childFolders",
            lambda m: _folder(me, m).child_folders.to_post_request_information(body),
        ),
        ("PATCH", FOLDER, lambda m: _folder(me, m).to_patch_request_information(body)),
        (
            "POST",
            FOLDER + "/messages",
            lambda m: _folder(me, m).messages.to_post_request_information(Message()),
        ),
        ("PATCH", MESSAGE, lambda m: _message(me, m).to_patch_request_information(body)),
        ("DELETE", MESSAGE, lambda m: _message(me, m).to_delete_request_information()),
        (
            "POST",
            MESSAGE + "/copy",
            lambda m: _message(me, m).copy.to_post_request_information(body),
        ),
        (
            "POST",
            MESSAGE + "/move",
            lambda m: _message(me, m).move.to_post_request_information(body),
        ),
        (
            "POST",
            r"/me/sendMail",
            lambda m: me.send_mail.to_post_request_information(SendMailPostRequestBody()),
        ),
    ]
    for verb, pattern, make in bodies:
        m = re.fullmatch(pattern, route or "")
        if m and verb == method:
            return make(m)
    return [f"request: msgraph-sdk has no request builder for {method} {path}"]


def _folder(me: Any, m: re.Match[str]) -> Any:
    return me.mail_folders.by_mail_folder_id(m["folder"])


def _message(me: Any, m: re.Match[str]) -> Any:
    return me.messages.by_message_id(m["message"])


# The model a JSON request body is, by method and path (after /v1.0).
BODY_MODELS: list[tuple[str, str, type[Parsable]]] = [
    ("POST", r"/me/mailFolders", MailFolder),
    ("POST", FOLDER + "/childFolders", MailFolder),
    ("PATCH", FOLDER, MailFolder),
    ("PATCH", MESSAGE, Message),
    ("POST", MESSAGE + "/copy", CopyPostRequestBody),
    ("POST", MESSAGE + "/move", MovePostRequestBody),
]


def fold_action_names(raw: bytes, cls: type[Parsable]) -> bytes:
    """An action body with its member names spelt as the SDK's model spells them."""
    # Graph matches action parameter names without regard to case: its docs write copy's and
    # move's `destinationId`, the SDK's metadata `DestinationId`, and both are accepted.
    try:
        sent = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(sent, dict):
        return raw
    names = {k.lower(): k for k in cls().get_field_deserializers()}
    return json.dumps({names.get(k.lower(), k): v for k, v in sent.items()}).encode()


def check_request(client: GraphServiceClient, exchange: dict[str, Any]) -> tuple[list[str], bool]:
    """(b): the call the SDK builds for the same operation against the one sent; was it built."""
    if not exchange["path"].startswith("/v1.0/"):
        return [f"request: {exchange['path']} is not under /v1.0"], False
    route = exchange["path"][len("/v1.0") :]
    body_cls = next(
        (c for verb, p, c in BODY_MODELS if verb == exchange["method"] and re.fullmatch(p, route)),
        None,
    )
    raw = base64.b64decode(exchange["body"])
    if body_cls in (CopyPostRequestBody, MovePostRequestBody):
        raw = fold_action_names(raw, body_cls)
    problems: list[str] = []
    body = None
    if body_cls is not None:
        try:
            body = parse(raw, body_cls)
        except Exception as e:
            return [f"request: the JSON body does not parse as {body_cls.__name__}: {e!r}"], False
        problems += unknown_members(body, f"request {body_cls.__name__}")
    info = build(client, exchange, body)
    if isinstance(info, list):
        return problems + info, False
    assert isinstance(info, RequestInformation)
    url = urlsplit(info.url)
    sdk_path = unquote(url.path).replace(BASE, "")
    sdk_path = "/v1.0" + sdk_path.replace(ME_TOKEN, "/me", 1)
    if info.http_method is None or info.http_method.value != exchange["method"]:
        problems.append(f"request: the SDK sends {info.http_method}, not {exchange['method']}")
    if sdk_path != exchange["path"]:
        problems.append(f"request: the SDK's path is {sdk_path}, not {exchange['path']}")
    sdk_query = sorted(parse_qsl(url.query, keep_blank_values=True))
    sent_query = sorted((n, v) for n, v in exchange["query"])
    if sdk_query != sent_query:
        problems.append(f"request: the SDK's query is {sdk_query}, not {sent_query}")
    if body_cls is not None:
        problems += differences(json.loads(raw), json.loads(info.content or b"null"), "request")
    return problems, True


def main(path: str) -> int:
    """Check every exchange in the JSON-lines file at `path`; 0 when all are ok."""
    adapter = GraphRequestAdapter(AnonymousAuthenticationProvider())
    adapter.base_url = BASE
    client = GraphServiceClient(request_adapter=adapter)
    responses = requests = 0
    all_ok = True
    with open(path, encoding="utf-8") as f:
        exchanges = [json.loads(line) for line in f if line.strip()]
    for i, exchange in enumerate(exchanges):
        problems: list[str] = []
        if exchange.get("model"):
            problems += check_response(exchange)
            responses += 1
        found, built = check_request(client, exchange)
        problems += found
        requests += built
        all_ok = all_ok and not problems
        print(json.dumps({"index": i, "ok": not problems, "problems": problems}))
    summary = {"summary": True, "exchanges": len(exchanges), "responses_checked": responses}
    print(json.dumps({**summary, "requests_checked": requests, "ok": all_ok}))
    return 0 if all_ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check.py EXCHANGES.jsonl")
    sys.exit(main(sys.argv[1]))
