"""Load a fixture corpus (DIR/manifest.json) into a mailbox over IMAP with TLS.

Creates the manifest's folders (names encoded in modified UTF-7 and quoted on the wire),
APPENDs every message with its flags and internal date, then checks the message count of
every folder. A file listed under several folders is appended to each (fixtures/gmail: one
message under several labels). Meant for a fresh mailbox (scripts/test-services start loads
fixtures/mail for alice and fixtures/gmail for the Gmail-shaped user).

usage: load_fixtures.py --host localhost --port PORT --ca CA.crt --user U --password P DIR
"""

from __future__ import annotations

import argparse
import imaplib
import json
import ssl
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.mailbox_names import quote_mailbox


def check(result: tuple[str, Any], what: str) -> Any:
    status, data = result
    if status != "OK":
        raise SystemExit(f"load_fixtures: {what} failed: {status} {data!r}")
    return data


def load(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    context = ssl.create_default_context(cafile=args.ca)
    imap = imaplib.IMAP4_SSL(args.host, args.port, ssl_context=context, timeout=30)
    try:
        check(imap.login(args.user, args.password), "LOGIN")
        for folder in manifest["create_folders"]:
            status, data = imap.create(quote_mailbox(folder))
            if status != "OK" and b"ALREADYEXISTS" not in b" ".join(data):
                raise SystemExit(f"load_fixtures: CREATE {folder!r} failed: {data!r}")
            check(imap.subscribe(quote_mailbox(folder)), f"SUBSCRIBE {folder!r}")
        for entry in manifest["messages"]:
            message = (root / entry["file"]).read_bytes()
            flags = "(" + " ".join(entry["flags"]) + ")" if entry["flags"] else None
            when = datetime.fromisoformat(entry["internal_date"])
            check(
                imap.append(quote_mailbox(entry["folder"]), flags, when, message),
                f"APPEND {entry['file']}",
            )
        expected = Counter(entry["folder"] for entry in manifest["messages"])
        for folder, count in sorted(expected.items()):
            data = check(imap.status(quote_mailbox(folder), "(MESSAGES)"), f"STATUS {folder!r}")
            got = int(data[0].rsplit(b"MESSAGES ", 1)[1].split(b")")[0])
            if got != count:
                raise SystemExit(f"load_fixtures: {folder!r} has {got} messages, want {count}")
        imap.logout()
    except BaseException:
        imap.shutdown()
        raise


def main() -> None:
    parser = argparse.ArgumentParser(description="load a fixture corpus into an IMAP mailbox")
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True, help="CA certificate file to trust")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("dir", help="the fixture directory (with manifest.json)")
    try:
        load(parser.parse_args())
    except (OSError, imaplib.IMAP4.error) as e:
        sys.exit(f"load_fixtures: {e!r}")


if __name__ == "__main__":
    main()
