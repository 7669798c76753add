"""Shared pytest fixtures. Keep this file small: put helpers in tests/support/."""

from support.services import services

__all__ = ["services"]
