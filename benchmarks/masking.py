"""What masking secrets costs each line of a step's log, and resolving a secret.

Masks 4,000 log-like lines one by one, as a worker does (``scheduler.secrets.Lines``), with no
secret, then one 35-character token, then a PEM private key too, then a second one; prints the
best of five rounds per line, and the time each ``remember`` took. Seconds in all.

    .venv/bin/python benchmarks/masking.py
"""

from __future__ import annotations

import random
import time
import timeit

from scheduler.secrets import Lines, remember

LINES = 4000
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
WORDS = [
    "processing",
    "item",
    "batch",
    "user",
    "request",
    "done",
    "started",
    "finished",
    "ok",
    "error",
    "retry",
    "status",
    "loaded",
    "rows",
    "from",
    "table",
    "into",
    "warehouse",
]


def pem(rng: random.Random) -> str:
    """A PEM private key's shape: 1,640 base64 characters in lines of 64."""
    body = "".join(rng.choice(ALPHABET) for _ in range(1640))
    lines = [body[at : at + 64] for at in range(0, len(body), 64)]
    return "\n".join(["-----BEGIN PRIVATE KEY-----", *lines, "-----END PRIVATE KEY-----"])


def log_lines(rng: random.Random) -> list[str]:
    return [
        f"2026-12-07 01:{i % 60:02d}:{i % 59:02d},{i % 997:03d} INFO "
        f"{' '.join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))} {i} of 5000 "
        f"({rng.random() * 100:.1f} ms)"
        for i in range(LINES)
    ]


def per_line(lines: list[str]) -> float:
    """Microseconds per line, the best of five rounds."""

    def run() -> None:
        masking = Lines()
        for line in lines:
            masking.add(line)
        masking.release()

    return min(timeit.repeat(run, number=1, repeat=5)) / len(lines) * 1e6


def main() -> None:
    rng = random.Random(1)
    lines = log_lines(rng)
    print(f"no secret: {per_line(lines):.2f} µs a line")
    token = "ghp_" + "".join(rng.choice(ALPHABET[:62]) for _ in range(31))
    for name, value in (("one token", token), ("+ a PEM key", pem(rng)), ("+ another", pem(rng))):
        started = time.perf_counter()
        remember([value])
        took = (time.perf_counter() - started) * 1000
        print(f"{name}: {per_line(lines):.2f} µs a line (remembered in {took:.1f} ms)")


if __name__ == "__main__":
    main()
