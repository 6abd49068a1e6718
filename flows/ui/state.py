"""What every request of ``flows ui`` works with, and the auth checks as dependencies."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from flows.ui.auth import Auth
from scheduler.engine.client import Client


@dataclass(frozen=True)
class UiState:
    """The engine's client and the auth policy (``app.state.ui``)."""

    client: Client
    auth: Auth


def state(request: Request) -> UiState:
    ui: UiState = request.app.state.ui
    return ui


def reader(request: Request) -> None:
    """A dependency of every read: what :meth:`Auth.read` allows."""
    state(request).auth.read(request)


def writer(request: Request) -> None:
    """A dependency of every write: the bearer token."""
    state(request).auth.write(request)
