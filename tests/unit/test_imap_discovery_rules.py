"""Pure discovery rules: special-use roles and Gmail detection."""

from __future__ import annotations

from providers.imap.discovery import is_gmail, special_folders
from providers.imap.settings import ImapSettings
from schemas.mailbox import Folder
from schemas.secret import Secret


def settings(host: str = "mail.example.test", gmail: bool = False) -> ImapSettings:
    return ImapSettings(host=host, port=993, username="u", password=Secret("p"), gmail_config=gmail)


class TestSpecialFolders:
    def test_roles_map_to_sorted_names_and_ambiguity_is_kept(self) -> None:
        folders = [
            Folder("Trash", "/", ["\\Trash"]),
            Folder("Deleted Items", "/", ["\\HasNoChildren", "\\trash"]),
            Folder("Sent", "/", ["\\Sent"]),
            Folder("INBOX", "/", []),
        ]
        assert special_folders(folders) == {"sent": ["Sent"], "trash": ["Deleted Items", "Trash"]}

    def test_unselectable_folders_are_left_out(self) -> None:
        folders = [
            Folder("[Gmail]", "/", ["\\Noselect", "\\All"]),
            Folder("Gone", "/", ["\\NonExistent", "\\Archive"]),
            Folder("All Mail", "/", ["\\All"]),
        ]
        assert special_folders(folders) == {"all": ["All Mail"]}

    def test_unknown_attributes_are_no_roles(self) -> None:
        assert special_folders([Folder("X", "/", ["\\Important", "\\Marked"])]) == {}


class TestGmail:
    def test_preset_host_or_capability_marks_gmail(self) -> None:
        assert is_gmail(settings(gmail=True), frozenset())
        assert is_gmail(settings(host="IMAP.GMAIL.COM"), frozenset())
        assert is_gmail(settings(host="imap.googlemail.com."), frozenset())
        assert is_gmail(settings(), frozenset({"X-GM-EXT-1"}))

    def test_other_servers_are_not_gmail(self) -> None:
        assert not is_gmail(settings(), frozenset({"IMAP4REV1", "MOVE"}))
