"""The step log viewer in a real Chromium: a big log's first lines are drawn from its first
request alone, and whatever the log's size the page never holds more than the lines in view and
a margin, never draws more in one task, fetches it a bounded page at a time and searches it a
bounded slice a task (counted in the page, never timed: how fast it is, is
``benchmarks/log_viewer.py``'s); search, colours from SGR sequences, hostile lines shown as
text, unicode as text, the raw download, attempts, and the URL naming what is open."""

from __future__ import annotations

import itertools
import json
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_dashboard import node, pop, register

from flows.runs.actions import retry_job
from flows.runs.trigger import trigger_run
from scheduler.engine.client import Client
from scheduler.engine.job import Job


def append(
    client: Client, job: Job, texts: list[str], attempt: int = 1, stream: str = "stdout"
) -> None:
    """``texts`` as the job's lines (as a worker stores them, 5,000 a call at most)."""
    now = time.time()
    for start in range(0, len(texts), 5000):
        chunk = texts[start : start + 5000]
        args: list[Any] = [job.jid, attempt, 0, len(chunk)]
        for text in chunk:
            args += [now, stream, "", text]
        client.engine.call("log.append", *args)


def started(client: Client, tmp_path: Path) -> tuple[str, Job]:
    """A run of the test flow, its first step ``extract`` popped (running)."""
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"]).run_id
    return run_id, pop(client, flow["queue"])


FIRST = 300  # the lines of a log's first request (logview.js says the same)
PAGE = 1000  # the most lines of any later one
SEARCH_SLICE = 5000  # the lines searched a task
ROWS = 150  # more line elements than the view and its margin ever need, in a 1280x800 tab

# Watches the log viewer from its page's start (an init script: it runs before the page's own
# scripts, under any Content-Security-Policy). A MutationObserver's callback runs once the task
# that changed the page is over, before the next one: so it sees how many line elements the
# log holds and how many one task added, how many lines had come in when the first was drawn,
# and each "searching: N of M lines" a slice of the search left.
WATCH = """document.addEventListener('DOMContentLoaded', () => {
  const log = document.getElementById('log');
  const label = document.getElementById('log-matches');
  if (!log) return;
  const seen = window.__seen = {held: 0, added: 0, firstDrawnWith: null, searched: []};
  new MutationObserver((records) => {
    let added = 0;
    for (const record of records) {
      for (const node of record.addedNodes) if (node.classList?.contains('line')) added++;
    }
    seen.added = Math.max(seen.added, added);
    seen.held = Math.max(seen.held, log.querySelectorAll('.line').length);
    if (seen.firstDrawnWith === null && log.querySelector('.line:not(.pending)')) {
      seen.firstDrawnWith = window.FlowsLog.viewer.loaded();
    }
  }).observe(log, {childList: true, subtree: true});
  new MutationObserver(() => {
    const step = /^searching: ([\\d,]+) of /.exec(label.textContent);
    if (step) seen.searched.push(Number(step[1].replaceAll(',', '')));
  }).observe(label, {childList: true, characterData: true, subtree: true});
});"""


def watched(page: Any) -> dict[str, Any]:
    """What :data:`WATCH` saw in the page so far."""
    seen: dict[str, Any] = page.evaluate("window.__seen")
    return seen


def log_requests(page: Any) -> list[tuple[int, int]]:
    """``(offset, limit)`` of every page of lines the tab asks for, as it asks (filled in)."""
    asked: list[tuple[int, int]] = []

    def note(request: Any) -> None:
        url = urllib.parse.urlsplit(request.url)
        if url.path.endswith("/logs"):
            query = urllib.parse.parse_qs(url.query)
            asked.append((int(query["offset"][0]), int(query["limit"][0])))

    page.on("request", note)
    return asked


def open_step(page: Any, step: str, count: str) -> None:
    """Clicks ``step``'s node; until its log's first lines are drawn and its count says
    ``count``."""
    node(page, step).click()
    page.wait_for_function(
        "(count) => document.querySelector('#log .line:not(.pending)')"
        " && document.getElementById('log-count').textContent.startsWith(count)",
        arg=count,
    )


# Whether line `n` is drawn inside the log's visible box.
IN_VIEW = """(n) => {
  const row = document.querySelector(`#log .line[data-n="${n}"]:not(.pending)`);
  if (!row) return false;
  const box = document.getElementById('log').getBoundingClientRect();
  const at = row.getBoundingClientRect();
  return at.top >= box.top - 1 && at.bottom <= box.bottom + 1;
}"""


def lines_shown(page: Any) -> list[str]:
    return page.locator("#log .line").all_inner_texts()


def wait_drawn(page: Any, number: int) -> None:
    """Until line ``number`` (from 1) is drawn with its text."""
    page.wait_for_selector(f'#log .line[data-n="{number}"]:not(.pending)')


def wait_step(page: Any, step: str) -> None:
    """Until the step panel shows ``step``."""
    page.wait_for_function(
        "step => (document.querySelector('#step-detail h2') || {}).textContent"
        "?.startsWith(step + ' ')",
        arg=step,
    )


def wait_text(page: Any, element: str, test: str, **options: Any) -> None:
    """Until the text of element ``#element`` passes ``test`` (JS on ``text``)."""
    page.wait_for_function(
        f"(() => {{ const text = document.getElementById('{element}').textContent; "
        f"return {test}; }})()",
        **options,
    )


def test_a_10000_line_log_is_drawn_from_its_first_request_and_only_what_is_seen(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    run_id, extract = started(client, tmp_path)
    words = "the quick brown fox jumps over the lazy dog " * 2
    texts = [f"{i:05d} {words}" for i in range(1, 10_001)]
    append(client, extract, texts)
    extract.complete()
    assert json.loads(client.engine.call("log.get", extract.jid, 1, 0, 1))["total"] == 10_000
    page.add_init_script(WATCH)
    asked = log_requests(page)
    page.goto(f"{base}/runs/{run_id}")
    page.wait_for_selector("g.node")
    open_step(page, "extract", "10,000")
    # drawn from the first request's lines: what opening costs is not the log's size
    assert watched(page)["firstDrawnWith"] == FIRST
    assert asked[0] == (0, FIRST)
    assert lines_shown(page)[0] == texts[0]
    shoot(page, "log-viewer")
    # scrolled to the end, the last lines come in and are drawn
    page.eval_on_selector("#log", "e => { e.scrollTop = e.scrollHeight; }")
    wait_drawn(page, 10000)
    assert lines_shown(page)[-1] == texts[-1]
    assert all(limit <= PAGE for _, limit in asked[1:]), asked
    seen = watched(page)
    assert seen["held"] < ROWS and seen["added"] < 2 * ROWS, seen  # the view and a margin
    # opened from a link, the same: drawn from its first request's lines, with the run page
    page.goto(f"{base}/runs/{run_id}?step=extract")
    wait_drawn(page, 1)
    assert watched(page)["firstDrawnWith"] == FIRST
    assert page.errors == []


@pytest.mark.timeout(600)  # about 20 s; several minutes on a machine busy with other work
def test_a_100000_line_log_is_drawn_fetched_and_searched_a_bounded_piece_a_task(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    client.engine.call("config.set", "log-lines", 100_000)
    client.engine.call("config.set", "log-bytes", 16 * 1024 * 1024)
    run_id, extract = started(client, tmp_path)
    texts = [f"line {i} \x1b[32mok\x1b[0m some work done here" for i in range(1, 100_001)]
    texts[98_765] = "line 98766 the one needle in the haystack"
    append(client, extract, texts)
    extract.complete()
    page.add_init_script(WATCH)
    asked = log_requests(page)
    page.goto(f"{base}/runs/{run_id}")
    page.wait_for_selector("g.node")
    open_step(page, "extract", "100,000")
    assert watched(page)["firstDrawnWith"] == FIRST
    # the middle, straight away: the lines in view are fetched first
    page.eval_on_selector("#log", "e => { e.scrollTop = e.scrollHeight / 2; }")
    wait_drawn(page, 50010)
    # search finds the needle once every page is in
    page.fill("#log-find", "needle")
    # a bound on a hung wait only: a busy machine takes minutes to fetch and search it all
    wait_text(page, "log-matches", "text === '1 of 1'", timeout=300_000)
    current = page.locator("#log .line.current")
    assert current.get_attribute("data-n") == "98766"
    assert current.locator("mark").inner_text() == "needle"
    assert page.get_attribute("#log-matches", "aria-busy") is None
    # every line came in pages of at most PAGE lines, each drawn in a task of its own, and the
    # page never held more than the view's lines and a margin
    seen = watched(page)
    assert seen["held"] < ROWS and seen["added"] < 2 * ROWS, seen
    assert asked[0] == (0, FIRST) and all(limit <= PAGE for _, limit in asked[1:]), asked
    # each slice of the search was a task of its own (its step seen before the next one's), of
    # SEARCH_SLICE lines: a search starts over at the first slice, or goes on by one
    steps = seen["searched"]
    assert steps and steps[-1] == 100_000 - SEARCH_SLICE, steps
    for before, after in itertools.pairwise(steps):
        assert after in (SEARCH_SLICE, before + SEARCH_SLICE), steps
    assert page.errors == []


def test_search_highlights_every_match_and_steps_through_them(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    run_id, extract = started(client, tmp_path)
    texts = [f"step {i} fine" for i in range(1, 3001)]
    texts[99] = "Warning: disk nearly full"
    texts[2499] = "error: the WARNING above came true, warning again"
    append(client, extract, texts)
    extract.complete()
    page.goto(f"{base}/runs/{run_id}?step=extract")
    page.wait_for_selector("#log .line")
    page.fill("#log-find", "warning")
    wait_text(page, "log-matches", "text === '1 of 3'")
    assert page.locator("#log .line.current").get_attribute("data-n") == "100"
    assert page.locator("#log .line.current mark").all_inner_texts() == ["Warning"]
    page.press("#log-find", "Enter")
    wait_text(page, "log-matches", "text === '2 of 3'")
    current = page.locator("#log .line.current")
    assert current.get_attribute("data-n") == "2500"
    assert current.locator("mark").all_inner_texts() == ["WARNING", "warning"]
    page.click("#log-next")
    wait_text(page, "log-matches", "text === '3 of 3'")
    page.press("#log-find", "Shift+Enter")
    wait_text(page, "log-matches", "text === '2 of 3'")
    page.fill("#log-find", "no such text")
    wait_text(page, "log-matches", "text === 'no match'")
    assert page.locator("#log mark").count() == 0
    assert page.errors == []


COLOURED = (
    "\x1b[31mred\x1b[0m plain \x1b[1;32mbold green\x1b[0m \x1b[38;5;208morange\x1b[39m "
    "\x1b[38;2;10;20;30;48;5;21mdeep\x1b[0m \x1b[4munder\x1b[24m \x1b[7minverse\x1b[m"
)
HOSTILE = (
    '<img src=x onerror="window.__xss = 3"><script>window.__xss = 4</script>'
    "\x1b]0;a title\x07\x1b[2J\x1b[1;1H\x00bell\x07 back\x08 \u202eevil\u061c\x1b"
)
UNICODE = "✔ done — naïve café, 日本語, emoji 🎉, tab\there"


def test_colours_hostile_lines_and_unicode_are_shown_as_styled_text(
    page: Any, base: str, client: Client, tmp_path: Path, shoot: Any
) -> None:
    run_id, extract = started(client, tmp_path)
    progress = "progress 10%\rprogress 50%\rprogress 100%"
    append(client, extract, [COLOURED, HOSTILE, UNICODE, progress])
    append(client, extract, ["to stderr"], stream="stderr")
    extract.complete()
    page.goto(f"{base}/runs/{run_id}?step=extract")
    page.wait_for_function("document.querySelectorAll('#log .line').length === 5")
    shown = lines_shown(page)
    assert shown[0] == "red plain bold green orange deep under inverse"
    line = page.locator('#log .line[data-n="1"]')
    assert line.locator("span.sgr-fg1").inner_text() == "red"
    assert line.locator("span.sgr-bold.sgr-fg2").inner_text() == "bold green"
    styles = line.locator("span").evaluate_all(
        "spans => spans.map(s => "
        "[s.textContent, s.style.color, s.style.backgroundColor, s.className])"
    )
    assert ["orange", "rgb(255, 135, 0)", "", ""] in styles
    assert ["deep", "rgb(10, 20, 30)", "rgb(0, 0, 255)", ""] in styles
    assert ["under", "", "", "sgr-underline"] in styles
    assert ["inverse", "", "", "sgr-inv-fg sgr-inv-bg"] in styles
    # nothing of the hostile line ran or became markup; its controls are visible symbols
    assert (
        shown[1] == '<img src=x onerror="window.__xss = 3"><script>window.__xss = 4</script>'
        "␀bell␇ back␈ <U+202E>evil<U+061C>␛"
    )
    assert page.locator("#log img, #log script").count() == 0
    assert page.evaluate("window.__xss") is None
    assert page.locator('#log .line[data-n="2"] .ctl').count() == 6
    assert shown[2] == UNICODE
    assert shown[3] == "progress 100%"  # a redrawn progress line as a terminal leaves it
    assert "stderr" in (page.locator('#log .line[data-n="5"]').get_attribute("class") or "")
    shoot(page, "log-colours")
    # each line's time on demand; "/" goes to the search
    page.check("#log-times")
    stamp = page.locator('#log .line[data-n="3"] .time').inner_text()
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d\d\d ", stamp), stamp
    assert page.locator('#log .line[data-n="3"]').inner_text() == stamp + UNICODE
    page.locator("#log").focus()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "log-find"
    assert page.errors == []


def test_unicode_data_shows_as_text_in_the_step_panel(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    flow = register(client, tmp_path)
    run_id = trigger_run(client, flow["name"], {"who": "✔ Zürich 日本"}).run_id
    page.goto(f"{base}/runs/{run_id}?step=extract")
    page.wait_for_selector("#step-detail dl.kv")
    panel = page.inner_text("#step-detail")
    assert '"who": "✔ Zürich 日本"' in panel
    assert "\\u" not in panel


def test_the_raw_log_downloads_as_text_per_attempt(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    run_id, extract = started(client, tmp_path)
    first = [f"first try {i} \x1b[31mred\x1b[0m ✔" for i in range(2500)]
    append(client, extract, first)
    append(client, extract, ["second try", "<b>done</b>"], attempt=2)  # as after a retry
    extract.complete()
    with urllib.request.urlopen(f"{base}/api/v1/jobs/{extract.jid}/logs/raw?attempt=1") as reply:
        assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
        disposition = reply.headers["Content-Disposition"]
        body = reply.read().decode()
    assert disposition.startswith("attachment;") and "attempt-1.log" in disposition
    assert body == "".join(text + "\n" for text in first)  # 3 pages, in order, colours kept
    with urllib.request.urlopen(f"{base}/api/v1/jobs/{extract.jid}/logs/raw") as reply:
        assert reply.read().decode() == "second try\n<b>done</b>\n"
    # in the page: the latest attempt first, the other one chosen, and the link follows
    page.goto(f"{base}/runs/{run_id}?step=extract")
    page.wait_for_function("document.querySelectorAll('#log .line').length === 2")
    assert page.locator("#log-attempt option").all_inner_texts() == ["1", "2 (latest)"]
    href = page.get_attribute("#log-download", "href")
    assert href == f"/api/v1/jobs/{urllib.parse.quote(extract.jid, safe='')}/logs/raw?attempt=2"
    page.select_option("#log-attempt", "1")
    wait_text(page, "log-count", "text.startsWith('2,500 lines')")
    assert lines_shown(page)[0] == "first try 0 red ✔"
    assert "attempt=1" in page.url
    assert page.get_attribute("#log-download", "href").endswith("attempt=1")
    with page.expect_download() as download:
        page.click("#log-download")
    assert Path(download.value.path()).read_text() == body
    page.reload()  # the link names the attempt
    wait_text(page, "log-count", "text.startsWith('2,500 lines')")
    assert page.input_value("#log-attempt") == "1"
    assert page.errors == []


def test_an_attempt_that_wrote_nothing_is_said_and_the_earlier_ones_lines_labelled(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """extract's first attempt wrote lines and failed; the run's retry started a second one,
    which wrote none. The viewer counts the job's attempts (2), not its log's (1): it shows
    attempt 1's lines as "attempt 1 of 2" and says the latest wrote nothing, while it runs
    and once it failed, in the run page as in the job page."""
    run_id, extract = started(client, tmp_path)
    append(client, extract, ["first try: connecting", "connection reset"], attempt=extract.runs)
    extract.fail("boom", "connection reset")
    retry_job(client, extract.jid)
    [second] = client.queues[extract.queue].pop()
    assert (second.jid, second.runs) == (extract.jid, 2)
    jid = urllib.parse.quote(extract.jid, safe="")
    with urllib.request.urlopen(f"{base}/api/v1/jobs/{jid}/logs") as reply:
        latest = json.load(reply)
    assert (latest["attempt"], latest["attempts"], latest["total"]) == (1, 2, 2)
    with urllib.request.urlopen(f"{base}/api/v1/jobs/{jid}/logs?attempt=2") as reply:
        silent = json.load(reply)
    assert (silent["attempt"], silent["attempts"], silent["items"]) == (2, 2, [])

    page.goto(f"{base}/runs/{run_id}?step=extract")  # running its second attempt
    wait_text(page, "log-state", "text === 'following'")
    assert lines_shown(page) == ["first try: connecting", "connection reset"]
    assert page.inner_text("#log-count") == (
        "2 lines · attempt 1 of 2 · the latest attempt (2) has written nothing yet"
    )
    assert page.locator("#log-attempt option").all_inner_texts() == ["1", "2 (latest)"]
    assert page.input_value("#log-attempt") == "1"
    second.fail("boom", "quota exceeded")  # still no line
    wait_text(page, "log-state", "text === 'ended'")
    said = "2 lines · attempt 1 of 2 · the latest attempt (2) wrote nothing"
    wait_text(page, "log-count", f"text === {json.dumps(said)}")
    page.reload()
    wait_text(page, "log-count", f"text === {json.dumps(said)}")
    assert lines_shown(page) == ["first try: connecting", "connection reset"]
    page.select_option("#log-attempt", "2")
    wait_text(page, "log-count", "text.startsWith('0 lines')")
    assert page.inner_text("#log-count") == (
        "0 lines · attempt 2 of 2 · the latest attempt (2) wrote nothing"
    )
    assert page.locator("#log .line").count() == 0
    page.goto(f"{base}/jobs/{jid}")  # the job page's viewer says the same
    wait_text(page, "log-count", f"text === {json.dumps(said)}")
    assert lines_shown(page) == ["first try: connecting", "connection reset"]
    assert page.errors == []


def test_a_retry_that_writes_after_a_silent_start_is_followed(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    """Opened while the second attempt has written nothing yet, the viewer follows the job:
    the second attempt's first line switches it to that attempt, said no more to be silent."""
    run_id, extract = started(client, tmp_path)
    append(client, extract, ["first try"])
    extract.fail("boom", "it broke")
    retry_job(client, extract.jid)
    [second] = client.queues[extract.queue].pop()
    page.goto(f"{base}/runs/{run_id}?step=extract")
    wait_text(page, "log-state", "text === 'following'")
    wait_text(page, "log-count", "text.includes('has written nothing yet')")
    append(client, second, ["second try"], attempt=second.runs)
    wait_text(page, "log-count", "text === '1 line · attempt 2 of 2'")
    assert lines_shown(page) == ["second try"]
    assert page.input_value("#log-attempt") == "2"
    assert page.errors == []


def test_the_url_names_the_open_step_attempt_and_line_and_back_and_forward_follow_it(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    run_id, extract = started(client, tmp_path)
    append(client, extract, [f"extract line {i}" for i in range(1, 201)])
    extract.complete()
    page.goto(f"{base}/runs/{run_id}")
    assert "step=" not in page.url  # a run that has not failed opens no step by itself
    node(page, "extract").click()
    page.wait_for_url(lambda url: url.endswith("?step=extract"))
    page.wait_for_selector('#log .line[data-n="1"]')
    node(page, "load").click()
    page.wait_for_url(lambda url: url.endswith("?step=load"))
    page.wait_for_selector("#step-detail table.items")
    # an item of the foreach step: its job is named in the URL
    page.wait_for_selector("#step-detail [data-log]")
    page.locator("#step-detail [data-log]").first.click()
    page.wait_for_url(lambda url: "step=load&job=" in url)
    page.go_back()
    page.wait_for_url(lambda url: url.endswith("?step=load"))
    page.go_back()
    page.wait_for_url(lambda url: url.endswith("?step=extract"))
    wait_step(page, "extract")
    page.wait_for_selector('#log .line[data-n="1"]')
    assert lines_shown(page)[0] == "extract line 1"
    page.go_forward()
    wait_step(page, "load")
    # a line linked: a click on its number names it, and the link opens there
    page.goto(f"{base}/runs/{run_id}?step=extract")
    row = page.locator('#log .line[data-n="3"]')
    row.click(position={"x": 10, "y": 9})
    page.wait_for_url(lambda url: url.endswith("?step=extract&attempt=1&line=3"))
    page.goto(f"{base}/runs/{run_id}?step=extract&line=150")
    page.wait_for_selector('#log .line.marked[data-n="150"]')
    assert page.locator("#log .line.marked").inner_text() == "extract line 150"
    page.wait_for_function(IN_VIEW, arg="150")
    assert page.errors == []


def test_a_failed_run_opens_at_its_first_failed_step_and_the_end_of_its_log(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    run_id, extract = started(client, tmp_path)
    append(client, extract, [f"working {i}" for i in range(1, 2001)] + ["Error: it broke"])
    extract.fail("exit-code-4", "command exited with code 4")
    page.goto(f"{base}/runs/{run_id}")
    page.wait_for_url(lambda url: url.endswith("?step=extract"))
    page.wait_for_selector("#step-detail .failure")
    wait_drawn(page, 2001)
    assert lines_shown(page)[-1] == "Error: it broke"
    page.wait_for_function(IN_VIEW, arg="2001")  # the end is what is seen
    assert page.inner_text("#log-state") == "ended"
    assert page.errors == []
    # the step opened by itself replaced the URL: back leaves the run page
    page.go_back()
    assert page.url == "about:blank"


def test_a_running_step_is_followed_and_a_retry_switches_to_its_attempt(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    run_id, extract = started(client, tmp_path)
    append(client, extract, [f"early {i}" for i in range(1, 401)])
    page.goto(f"{base}/runs/{run_id}?step=extract")
    wait_text(page, "log-state", "text === 'following'")
    assert page.is_checked("#log-follow")
    wait_drawn(page, 400)  # opened at the end
    append(client, extract, ["late line"])
    wait_drawn(page, 401)
    assert lines_shown(page)[-1] == "late line"
    # a burst: drawn a frame at a time, the view kept at the end
    append(client, extract, [f"burst {i}" for i in range(1, 3001)])
    page.wait_for_function(IN_VIEW, arg="3401")
    assert lines_shown(page)[-1] == "burst 3000"
    assert page.locator("#log .line").count() < 150
    append(client, extract, ["second attempt starts"], attempt=2)
    wait_text(page, "log-count", "text.includes('attempt 2 of 2')")
    assert lines_shown(page) == ["second attempt starts"]
    extract.complete()
    wait_text(page, "log-state", "text === 'ended'")
    assert not page.is_checked("#log-follow")
    assert page.errors == []


def test_the_job_page_shows_the_jobs_log_and_names_the_line_linked(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    _, extract = started(client, tmp_path)
    append(client, extract, [f"job line {i}" for i in range(1, 51)])
    extract.fail("exit-code-4", "it broke")
    job_url = f"{base}/jobs/{urllib.parse.quote(extract.jid, safe='')}"
    page.goto(job_url)
    wait_drawn(page, 50)  # a failed job's log opens at its end
    assert lines_shown(page)[-1] == "job line 50"
    page.locator('#log .line[data-n="45"]').click(position={"x": 10, "y": 9})
    page.wait_for_url(lambda url: url.endswith("?attempt=1&line=45"))
    page.goto(job_url + "?line=7")
    page.wait_for_selector('#log .line.marked[data-n="7"]')
    assert page.errors == []


def test_an_attempt_the_job_never_made_is_told_apart_from_a_job_that_is_gone(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    _, extract = started(client, tmp_path)
    append(client, extract, ["the only attempt"])
    extract.fail("exit-code-4", "it broke")
    job_url = f"{base}/jobs/{urllib.parse.quote(extract.jid, safe='')}"
    page.goto(job_url + "?attempt=999")  # a link naming an attempt the job never made
    wait_text(page, "log-state", "text.includes('no attempt')")
    assert page.inner_text("#log-state") == (
        f"job '{extract.jid}' has no attempt 999 (it has 1 attempt)"
    )
    page.goto(job_url)  # its attempt is still there
    wait_drawn(page, 1)
    assert lines_shown(page) == ["the only attempt"]
    # a job that is gone is still said to be gone, an attempt named or not
    gone = "the job no longer exists (its log went with it)"
    for options in ("{attempt: 2}", "{}"):
        page.evaluate(f"window.FlowsLog.open('no-such-job', {options})")
        wait_text(page, "log-state", f"text === {json.dumps(gone)}")
    assert page.errors == []


# (line, what it reads as, the styles of its segments: [text, fg, bg, flags])
SGR_CASES = [
    ("plain", "plain", [["plain", None, None, []]]),
    (
        "\x1b[1;31mA\x1b[22mB\x1b[39mC",
        "ABC",
        [["A", 1, None, ["bold"]], ["B", 1, None, []], ["C", None, None, []]],
    ),
    ("\x1b[38;5;244mgrey", "grey", [["grey", "rgb(128,128,128)", None, []]]),
    ("\x1b[38;5;9mbright", "bright", [["bright", 9, None, []]]),
    ("\x1b[38:2::1:2:3mcolon", "colon", [["colon", "rgb(1,2,3)", None, []]]),
    ("\x1b[4:3;38:5:2mwavy", "wavy", [["wavy", 2, None, ["underline"]]]),
    ("\x1b[97;104mhi\x1b[0m", "hi", [["hi", 15, 12, []]]),
    ("\x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\", "link", [["link", None, None, []]]),
    (
        "cut \x1b[31",
        "cut ␛[31",
        [["cut ", None, None, []], ["␛", None, None, ["ctl"]], ["[31", None, None, []]],
    ),
    ("\x1b[Kerase\x1b[2Aup", "eraseup", [["eraseup", None, None, []]]),
    ("a\x85b\u2066c", "a<U+0085>b<U+2066>c", None),
    ("crlf\r", "crlf", [["crlf", None, None, []]]),
]

PARSE = """(text) => window.FlowsLog.parse(text).map((s) => [
  s.text,
  s.style && s.style.fg !== undefined ? s.style.fg : null,
  s.style && s.style.bg !== undefined ? s.style.bg : null,
  s.ctl ? ['ctl'] : Object.keys(s.style || {}).filter((k) => k !== 'fg' && k !== 'bg').sort(),
])"""


def test_the_sgr_reader_on_sequences_real_programs_write(
    page: Any, base: str, client: Client, tmp_path: Path
) -> None:
    run_id, _ = started(client, tmp_path)
    page.goto(f"{base}/runs/{urllib.parse.quote(run_id, safe='')}")  # a page with the viewer
    page.wait_for_function("window.FlowsLog !== undefined")
    for text, reads, segments in SGR_CASES:
        assert page.evaluate("(t) => window.FlowsLog.plain(t)", text) == reads, text
        if segments is not None:
            assert page.evaluate(PARSE, text) == segments, text
