"""The benchmarks' memory reading counts only what the work adds, whenever the server's cron runs.

Each test has a private server: it changes the server's settings (``hz``, RESETSTAT).
"""

from __future__ import annotations

from redis import Redis

from benchmarks.context import private_server, wait_until
from benchmarks.server_memory import LATENCY_TRACKING, growth
from scheduler.engine.connections import connect

#: Far below a connection's 16 KB reply buffer or a command's 24 KB latency histogram.
SLACK = 1024
#: Members of a set big enough that freeing it takes the server's background thread a while.
BIG_SET = 600_000


def tally_caught_up(redis: Redis) -> bool:
    """The server's tally of connections' memory (INFO) agrees with CLIENT LIST's, read at once."""
    pipe = redis.pipeline(transaction=True)
    pipe.info("memory")
    pipe.client_list()
    memory, clients = pipe.execute()
    counted = sum(int(client["tot-mem"]) for client in clients)
    return abs(int(memory["mem_clients_normal"]) - counted) < SLACK


def test_a_connection_the_server_counts_late_moves_no_reading() -> None:
    with private_server() as (server, _):
        redis = connect(server.url)
        redis.config_set("hz", 1)  # the tally catches up once a second: the reading comes first
        other = connect(server.url)
        other.ping()

        def tick() -> None:
            wait_until(lambda: tally_caught_up(redis), 10, "the server's tally of connections")

        assert abs(growth(redis, tick)) < SLACK
        other.close()
        redis.close()


def test_a_commands_first_call_leaves_no_latency_histogram_in_the_growth() -> None:
    with private_server() as (server, _):
        redis = connect(server.url)
        redis.config_resetstat()  # drops every command's histogram: SET's first call makes one
        grown = growth(redis, lambda: redis.set("key", "value"))
        assert 0 < grown < SLACK
        assert redis.config_get(LATENCY_TRACKING)[LATENCY_TRACKING] == "yes"
        redis.close()


def test_a_key_freed_in_the_background_is_gone_before_the_reading() -> None:
    with private_server() as (server, _):
        redis = connect(server.url)
        redis.config_set("lazyfree-lazy-user-del", "yes")  # the default, said explicitly
        pipe = redis.pipeline(transaction=False)
        for first in range(0, BIG_SET, 1000):
            pipe.sadd("big", *range(first, first + 1000))
        pipe.execute()
        copies = [f"big{index}" for index in range(3)]
        for copy in copies:
            redis.sunionstore(copy, ["big"])
        redis.delete("big", *copies)  # returns at once: a background thread frees the members
        assert abs(growth(redis, lambda: None)) < SLACK
        redis.close()
