"""One engine call, one round trip, without redis-py's per-command machinery.

``Redis.execute_command`` costs a put about as much client CPU as the engine's whole server
work: each call takes a connection from the pool (a lock, a ``select`` to check the socket is
idle, observability counters), wraps the round trip in a retry policy, and gives the connection
back the same way. :class:`DirectCalls` keeps a few connections it borrowed from the client's pool
and sends on them directly; a connection goes back on its spare list only after a whole reply
was read, so the next call finds it idle without looking.

Only a plain :class:`redis.ConnectionPool` is used this way (a blocking pool with a small
``max_connections`` must not have connections held back). A connection fault is not handled
here: the caller sends the command again through redis-py, with its retry policy, exactly as
``execute_command`` would after the same fault.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import redis
from redis.connection import HiredisRespSerializer

try:
    import hiredis
except ImportError:  # redis-py packs in Python then
    hiredis = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from redis.connection import Connection

#: Connections kept between calls at most (one per thread calling at the same time).
MAX_SPARE = 8


def usable(client: Any) -> bool:
    """Whether ``client``'s calls may go through :class:`DirectCalls`."""
    if type(client) is not redis.Redis or client.connection is not None:
        return False  # a subclass may route calls its own way; a single connection is the one
    pool = client.connection_pool
    return type(pool) is redis.ConnectionPool and getattr(pool, "cache", None) is None


def _give_back(pool: redis.ConnectionPool, spare: list[Connection], pid: int) -> None:
    if os.getpid() != pid:
        return
    while spare:
        pool.release(spare.pop())


class DirectCalls:
    """Round trips on connections borrowed from ``client``'s pool (see the module's doc)."""

    def __init__(self, client: redis.Redis) -> None:
        self.pool: redis.ConnectionPool = client.connection_pool
        self.callbacks = client.response_callbacks
        self._pid = os.getpid()
        self._spare: list[Connection] = []
        self._finalizer = weakref.finalize(self, _give_back, self.pool, self._spare, self._pid)

    def call(self, *args: Any) -> Any:
        """Send one command and return its reply (an error reply raises its ResponseError)."""
        connection = self._borrow()
        try:
            self._send(connection, [args])
            reply = connection.read_response()
        except redis.ResponseError:
            self._keep(connection)  # an error reply, read whole: the connection is idle
            raise
        except BaseException:
            self._drop(connection)
            raise
        self._keep(connection)
        return reply

    def call_many(
        self, commands: Sequence[tuple[Any, ...]], meanwhile: Callable[[], None] | None = None
    ) -> list[Any]:
        """Send ``commands`` in one round trip, as redis-py's pipeline (not a transaction) does:
        the replies in order, each parsed by the client's response callback for its command,
        an error reply's slot holding its ResponseError. ``meanwhile`` runs after the send,
        while the server works on them (it must not raise)."""
        connection = self._borrow()
        replies: list[Any] = []
        try:
            self._send(connection, commands)
            if meanwhile is not None:
                meanwhile()
            for args in commands:
                try:
                    reply = connection.read_response()
                except redis.ResponseError as error:
                    replies.append(error)
                    continue
                callback = self.callbacks.get(args[0])  # type: ignore[no-untyped-call]
                replies.append(reply if callback is None else callback(reply))
        except BaseException:
            self._drop(connection)
            raise
        self._keep(connection)
        return replies

    def _borrow(self) -> Connection:
        if os.getpid() != self._pid:  # forked: the spare connections are the parent's
            self._finalizer.detach()
            self._pid, self._spare = os.getpid(), []
            self._finalizer = weakref.finalize(self, _give_back, self.pool, self._spare, self._pid)
        try:
            return self._spare.pop()
        except IndexError:
            return self.pool.get_connection()

    def _send(self, connection: Connection, commands: Sequence[tuple[Any, ...]]) -> None:
        if hiredis is not None and isinstance(connection._command_packer, HiredisRespSerializer):
            # What redis-py's hiredis packer sends for these arguments (text, numbers),
            # without its per-argument pass.
            # One write for the batch: redis-py writes each piece of a list on its own.
            packed = [b"".join([hiredis.pack_command(args) for args in commands])]
            connection.send_packed_command(packed)  # type: ignore[no-untyped-call]
        else:
            connection.send_packed_command(connection.pack_commands(commands))  # type: ignore[no-untyped-call]

    def _drop(self, connection: Connection) -> None:
        """A connection that failed mid-way: what it holds unread is lost with it."""
        connection.disconnect()  # type: ignore[no-untyped-call]
        self.pool.release(connection)

    def _keep(self, connection: Connection) -> None:
        if len(self._spare) < MAX_SPARE:
            self._spare.append(connection)
        else:
            self.pool.release(connection)

    def close(self) -> None:
        """Give the kept connections back to the pool."""
        _give_back(self.pool, self._spare, self._pid)
