"""How fast the dashboard's log viewer opens a big log, in a real Chromium (Debian's
``chromium``, driven by Playwright) against a real ``flows ui`` on a private server.

For a 10,000-line (about 1 MiB) and a 100,000-line log: from a call to open it to its first
lines drawn (in the page: ``performance.now()``), the best of ``--rounds``; from a navigation
to the job's page to its first lines drawn, the page's own load included; and, for the big
one, the longest task the page ran while every line came in and a search went through them
all (Chromium's ``longtask`` entries: none under 50 ms is reported). Wall time in the browser,
which a busy machine stretches: the load average is printed with the figures. What is bounded
whatever the speed (the elements drawn, the lines a request and a task) is what
``tests/browser/test_log_viewer.py`` checks.

    python -m benchmarks.log_viewer [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from playwright.sync_api import Page, sync_playwright

from benchmarks.context import Bench, Sizes, fresh_bench
from benchmarks.run_reads import served

QUEUE = "bench-logs"
WORDS = "the quick brown fox jumps over the lazy dog " * 2

# Opens job `jid`'s log; the time until its first lines are drawn and its count says `count`.
OPEN = """async ([jid, count]) => {
  const started = performance.now();
  window.FlowsLog.open(jid, {state: 'complete'});
  await new Promise((resolve) => {
    const ready = () => document.querySelector('#log .line:not(.pending)')
      && document.getElementById('log-count').textContent.startsWith(count);
    const check = () => (ready() ? resolve() : requestAnimationFrame(check));
    check();
  });
  return performance.now() - started;
}"""

# Notes, from the page's start, when its log's first line is drawn (`window.__drawn`, in ms).
FIRST_DRAWN = """document.addEventListener('DOMContentLoaded', () => {
  const log = document.getElementById('log');
  const drawn = new MutationObserver(() => {
    if (!log.querySelector('.line:not(.pending)')) return;
    window.__drawn = performance.now();
    drawn.disconnect();
  });
  drawn.observe(log, {childList: true, subtree: true});
});"""

LONG_TASKS = """() => {
  window.__long = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) window.__long.push(entry.duration);
  }).observe({type: 'longtask'});
}"""


def logged_job(bench: Bench, lines: int) -> str:
    """A job that wrote ``lines`` lines and completed; its jid."""
    bench.client.engine.call("config.set", "log-lines", lines)
    bench.client.engine.call("config.set", "log-bytes", 256 * lines)
    bench.client.queues[QUEUE].put("bench.logs")
    [job] = bench.client.queues[QUEUE].pop()
    now = time.time()
    for start in range(0, lines, 5000):  # as a worker stores them, 5,000 a call at most
        args: list[Any] = [job.jid, 1, 0, min(5000, lines - start)]
        for n in range(start, min(lines, start + 5000)):
            args += [now, "stdout", "", f"{n + 1:06d} \x1b[32mok\x1b[0m {WORDS}"]
        bench.client.engine.call("log.append", *args)
    job.complete()
    return job.jid


def job_page(base: str, jid: str) -> str:
    return f"{base}/jobs/{urllib.parse.quote(jid, safe='')}"


def opened_ms(page: Page, base: str, jid: str, lines: int, rounds: int) -> float:
    """The best of ``rounds`` opens of ``jid``'s log in its job page, from the call."""
    best = float("inf")
    for _ in range(rounds):
        page.goto(job_page(base, jid))
        page.wait_for_selector('#log .line[data-n="1"]')
        best = min(best, float(page.evaluate(OPEN, [jid, f"{lines:,}"])))
    return best


def linked_ms(page: Page, base: str, jid: str, rounds: int) -> float:
    """The best of ``rounds`` navigations to ``jid``'s page until its first line is drawn
    (:data:`FIRST_DRAWN` is one of the page's init scripts)."""
    best = float("inf")
    for _ in range(rounds):
        page.goto(job_page(base, jid))
        page.wait_for_selector("#log .line:not(.pending)")  # noted in the task that drew it
        best = min(best, float(page.evaluate("window.__drawn")))
    return best


def longest_task_ms(page: Page, base: str, jid: str, lines: int, needle: str) -> float:
    """The longest task while ``jid``'s whole log comes in and is searched for ``needle``."""
    page.goto(job_page(base, jid))
    page.wait_for_selector('#log .line[data-n="1"]')
    page.evaluate(LONG_TASKS)
    page.evaluate(OPEN, [jid, f"{lines:,}"])
    page.fill("#log-find", needle)
    page.wait_for_selector("#log .line.current", timeout=120_000)
    return max(page.evaluate("window.__long"), default=0.0)


@contextmanager
def browser_page() -> Iterator[Page]:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise SystemExit("no chromium on PATH (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.add_init_script(FIRST_DRAWN)
            yield page
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    with fresh_bench(Sizes(), rounds) as bench, served(bench) as base, browser_page() as page:
        for lines in (10_000, 100_000):
            jid = logged_job(bench, lines)
            opened = opened_ms(page, base, jid, lines, rounds)
            linked = linked_ms(page, base, jid, rounds)
            print(
                f"{lines:,}-line log: opened in {opened:.0f} ms, from a link in {linked:.0f} ms "
                f"(the page's load included); best of {rounds}"
            )
        longest = longest_task_ms(page, base, jid, lines, f"{lines // 2 + 1:06d}")
        print(f"{lines:,} lines fetched and searched: longest task {longest:.0f} ms")
    print("load average: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
