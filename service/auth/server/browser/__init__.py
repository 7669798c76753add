"""The owner's browser side of the first-party authorization server (see flow.py)."""

from .flow import OwnerBrowser

__all__ = ["OwnerBrowser"]
