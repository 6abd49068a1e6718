// flows ui: the step log viewer. Only the lines in view are in the page (virtual scrolling):
// the rest are fetched a page at a time from /api/v1/jobs/<jid>/logs and kept as data, so a log
// of 100,000 lines costs a few dozen elements. A line's text is put into the page with
// textContent only; SGR colour sequences become styled spans, every other control character is
// shown as a visible symbol, never passed to the page.
"use strict";

(function () {
  const ROW = 18;            // px per line: the CSS of #log .line says the same
  const FIRST = 300;         // lines of the first request: the view's, and some to scroll
  const PAGE = 1000;         // the API's largest page
  const OVERSCAN = 40;       // lines drawn above and below the view
  const MAX_HEIGHT = 8e6;    // px: a taller log maps its scroll position proportionally
  const SEARCH_SLICE = 5000; // lines searched a task: input is answered between two slices

  // -- SGR: a line's text as segments of styled text ------------------------------------------

  const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
  const SGR = /\x1b\[[0-9;:]*m/g;
  const NAMED = { 0x1b: "␛", 0x7f: "␡", 0x0d: "␍" };

  // How a control character is shown: a Control Picture for C0, its code for the rest.
  function visible(code) {
    if (NAMED[code]) return NAMED[code];
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    return "<U+" + code.toString(16).toUpperCase().padStart(4, "0") + ">";
  }

  // A name (a jid) as text with its control characters shown: a bidirectional override in it
  // would reorder the heading it is in.
  function shownName(text) {
    return String(text).replace(new RegExp(CONTROL.source, "g"), (c) => visible(c.charCodeAt(0)));
  }

  function xterm256(n) {
    if (n < 16) return null;  // the 16 colours: classes
    if (n >= 232) { const v = 8 + (n - 232) * 10; return `rgb(${v},${v},${v})`; }
    const i = n - 16, steps = [0, 95, 135, 175, 215, 255];
    return `rgb(${steps[Math.floor(i / 36)]},${steps[Math.floor(i / 6) % 6]},${steps[i % 6]})`;
  }

  // An extended colour (38;5;n or 38;2;r;g;b) from params[at...]: [colour, params used].
  function extended(params, at) {
    if (params[at] === 5 && params.length > at + 1) {
      const n = params[at + 1];
      if (n >= 0 && n < 256) return [n < 16 ? n : xterm256(n), 2];
      return [undefined, 2];
    }
    if (params[at] === 2 && params.length > at + 3) {
      const [r, g, b] = params.slice(at + 1, at + 4).map((v) => Math.max(0, Math.min(255, v)));
      return [`rgb(${r},${g},${b})`, 4];
    }
    return [undefined, params.length - at];
  }

  function applySgr(style, params) {
    if (params.length === 0) params = [0];
    for (let i = 0; i < params.length; i++) {
      const p = params[i];
      if (p === 0) { for (const key of Object.keys(style)) delete style[key]; }
      else if (p === 1) style.bold = true;
      else if (p === 2) style.dim = true;
      else if (p === 3) style.italic = true;
      else if (p === 4) style.underline = true;
      else if (p === 7) style.inverse = true;
      else if (p === 9) style.strike = true;
      else if (p === 22) { delete style.bold; delete style.dim; }
      else if (p === 23) delete style.italic;
      else if (p === 24) delete style.underline;
      else if (p === 27) delete style.inverse;
      else if (p === 29) delete style.strike;
      else if (p >= 30 && p <= 37) style.fg = p - 30;
      else if (p >= 90 && p <= 97) style.fg = p - 90 + 8;
      else if (p === 39) delete style.fg;
      else if (p >= 40 && p <= 47) style.bg = p - 40;
      else if (p >= 100 && p <= 107) style.bg = p - 100 + 8;
      else if (p === 49) delete style.bg;
      else if (p === 38 || p === 48) {
        const [colour, used] = extended(params, i + 1);
        if (colour !== undefined) style[p === 38 ? "fg" : "bg"] = colour;
        i += used;
      }
    }
  }

  // Applies one SGR sequence's parameters: `;`-separated, a colour given with `:` subparameters
  // (38:5:n, 38:2:r:g:b, 38:2:space:r:g:b) taken as one.
  function sgr(style, raw) {
    if (raw === "") { applySgr(style, []); return; }
    let run = [];  // plain parameters, applied together (38;5;n spans three)
    const apply = () => { if (run.length) applySgr(style, run); run = []; };
    for (const part of raw.split(";")) {
      if (!part.includes(":")) { run.push(part === "" ? 0 : Number(part)); continue; }
      apply();
      const parts = part.split(":").map((v) => (v === "" ? 0 : Number(v)));
      if ((parts[0] === 38 || parts[0] === 48) && parts[1] === 2) {
        const rgb = parts.length >= 6 ? parts.slice(3, 6) : parts.slice(2, 5);
        applySgr(style, [parts[0], 2, ...rgb]);
      } else if (parts[0] === 38 || parts[0] === 48) {
        applySgr(style, parts.slice(0, 3));
      } else {
        applySgr(style, [parts[0]]);  // 4:3 (a curly underline): an underline
      }
    }
    apply();
  }

  // The segments of one line: [{text, style}] (style null: plain; ctl: a control shown).
  // Colours start afresh on every line. A carriage return inside a line (a progress bar
  // redrawn) keeps what was written after the last one, as a terminal would show it.
  function parse(text) {
    text = text.replace(/\r+$/, "");
    const cr = text.lastIndexOf("\r");
    if (cr >= 0) text = text.slice(cr + 1);
    const out = [];
    if (!CONTROL.test(text)) { if (text) out.push({ text, style: null }); return out; }
    let style = {}, buffer = "";
    const flush = () => {
      if (buffer) out.push({ text: buffer, style: Object.keys(style).length ? { ...style } : null });
      buffer = "";
    };
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code === 0x1b && text[i + 1] === "[") {  // CSI: parameters, then a final byte
        let j = i + 2;
        while (j < text.length && /[0-?]/.test(text[j])) j++;
        while (j < text.length && /[ -/]/.test(text[j])) j++;
        if (j >= text.length) { flush(); out.push({ text: visible(code), ctl: true }); continue; }
        if (text[j] === "m") {
          flush();
          const raw = text.slice(i + 2, j);
          if (/^[\d;:]*$/.test(raw)) sgr(style, raw);
        }
        i = j;  // other CSI sequences (cursor moves, erasing) draw nothing here
      } else if (code === 0x1b && text[i + 1] === "]") {  // OSC (titles, links): dropped
        let j = i + 2;
        while (j < text.length && text.charCodeAt(j) !== 0x07
               && !(text.charCodeAt(j) === 0x1b && text[j + 1] === "\\")) j++;
        i = j < text.length && text.charCodeAt(j) === 0x1b ? j + 1 : j;
      } else if (code === 0x09 || !CONTROL.test(text[i])) {
        buffer += text[i];
      } else {
        flush();
        out.push({ text: visible(code), ctl: true });
      }
    }
    flush();
    return out;
  }

  // What a line reads as (what search looks in): its segments' text.
  function plain(text) {
    if (text.indexOf("\r") < 0) {
      if (!CONTROL.test(text)) return text;
      const bare = text.replace(SGR, "");  // the common case: colours only
      if (!CONTROL.test(bare)) return bare;
    }
    return parse(text).map((s) => s.text).join("");
  }

  function styleSpan(span, style) {
    const classes = [];
    let fg = style.fg, bg = style.bg;
    if (style.inverse) { [fg, bg] = [bg === undefined ? "inv-fg" : bg, fg === undefined ? "inv-bg" : fg]; }
    for (const [value, kind] of [[fg, "fg"], [bg, "bg"]]) {
      if (value === undefined) continue;
      if (typeof value === "number") classes.push(`sgr-${kind}${value}`);
      else if (value === "inv-fg" || value === "inv-bg") classes.push(`sgr-${value}`);
      else span.style[kind === "fg" ? "color" : "backgroundColor"] = value;
    }
    for (const flag of ["bold", "dim", "italic", "underline", "strike"]) {
      if (style[flag]) classes.push("sgr-" + flag);
    }
    span.className = classes.join(" ");
  }

  // Appends the segments to `into`, with the parts inside `marks` ([start, end) ranges of the
  // line's plain text) in <mark>.
  function draw(into, segments, marks) {
    let at = 0;
    for (const segment of segments) {
      const end = at + segment.text.length;
      let parent = into;
      if (segment.ctl || segment.style) {
        parent = document.createElement("span");
        if (segment.ctl) { parent.className = "ctl"; parent.title = "a control character"; }
        else styleSpan(parent, segment.style);
        into.append(parent);
      }
      let from = at;
      for (const [start, stop] of marks) {
        if (stop <= from || start >= end) continue;
        if (start > from) parent.append(segment.text.slice(from - at, start - at));
        const mark = document.createElement("mark");
        mark.textContent = segment.text.slice(Math.max(start, from) - at, Math.min(stop, end) - at);
        parent.append(mark);
        from = Math.min(stop, end);
      }
      if (from < end) parent.append(segment.text.slice(from - at));
      at = end;
    }
  }

  // -- the viewer -------------------------------------------------------------------------------

  function element(id) { return document.getElementById(id); }

  // What a refused read of a log says. The API's 404 tells a job that is not there ("no job
  // ...") from an attempt the job never made ("... has no attempt N (it has M attempts)"): the
  // latter is shown in the API's words (as text, its control characters visible), anything
  // else not found means the job went, and its log with it.
  async function refusal(reply) {
    if (!reply) return "could not load the log (network)";
    if (reply.status !== 404) return `could not load the log (${reply.status})`;
    let detail = "";
    try { detail = detailText((await reply.json()).detail); } catch (error) { detail = ""; }
    if (/ has no attempt \d+ \(/.test(detail)) return shownName(detail);
    return "the job no longer exists (its log went with it)";
  }

  // A job's states in which it writes no more lines.
  const ENDED = ["complete", "failed", "canceled", "expired", "buried"];

  class Viewer {
    constructor(panel) {
      this.panel = panel;
      this.view = element("log");
      this.spacer = this.view.querySelector(".spacer");
      this.rows = this.view.querySelector(".rows");
      this.gen = 0;
      this.stream = null;
      this.reset();
      this.view.addEventListener("scroll", () => this.schedule(false));
      window.addEventListener("resize", () => this.schedule(false));
      this.view.addEventListener("click", (e) => this.clicked(e));
      element("log-attempt").addEventListener("change", (e) => {
        this.open(this.jid, { attempt: Number(e.target.value), state: this.state, chosen: true });
      });
      const find = element("log-find");
      let typing = null;
      find.addEventListener("input", () => {
        clearTimeout(typing);
        typing = setTimeout(() => this.search(find.value), 150);
      });
      find.addEventListener("keydown", (e) => {
        if (e.key === "Enter") { e.preventDefault(); this.step(e.shiftKey ? -1 : 1); }
        if (e.key === "Escape") { find.value = ""; this.search(""); }
      });
      element("log-search").addEventListener("submit", (e) => e.preventDefault());
      element("log-next").addEventListener("click", () => this.step(1));
      element("log-prev").addEventListener("click", () => this.step(-1));
      element("log-times").addEventListener("change", (e) => {
        this.times = e.target.checked;
        this.render(true);
      });
      // "/" anywhere but in a field goes to the search, as in most log views
      document.addEventListener("keydown", (e) => {
        if (e.key !== "/" || this.panel.hidden || e.target.closest("input, textarea, select")) return;
        e.preventDefault();
        find.focus();
      });
      element("log-follow").addEventListener("change", (e) => {
        if (e.target.checked) this.follow(); else this.unfollow("paused");
        if (e.target.checked) this.toEnd();
      });
    }

    reset() {
      this.lines = [];       // the entries of the lines fetched ({text, stream, level, time})
      this.plains = [];      // their plain text, once searched
      this.total = 0;
      this.attempt = 0;
      this.attempts = 0;     // the attempts the job made, whether or not they wrote a line
      this.silent = 0;       // the first of the latest attempts known to have written nothing
      this.finished = false; // the followed job ended meanwhile
      this.dropped = 0;
      this.loading = null;
      this.wanted = null;    // a line waited for (a link, a search hit), scrolled to when loaded
      this.query = "";
      this.matches = [];
      this.current = -1;
      this.marked = null;    // the line a link points at
      this.drawn = "";
      this.streamCounts = {};
      this.endWanted = false;
      this.exhausted = false;
    }

    // Opens job `jid`'s log: its latest attempt (or `attempt`), following it while it runs.
    // options: {attempt, state (the job's, when known), line (to show), chosen (by the user)}.
    async open(jid, options = {}) {
      this.unfollow("");
      const gen = ++this.gen;
      this.reset();
      this.jid = jid;
      this.state = options.state || "";
      this.panel.hidden = false;
      element("log-jid").textContent = shownName(jid);
      element("log-state").textContent = "loading";
      element("log-count").textContent = "";
      this.view.scrollTop = 0;
      this.render(true);
      const first = await this.fetch(gen, options.attempt || null, 0, FIRST);
      if (first === null) return;
      this.attempt = first.attempt;
      this.attempts = Math.max(first.attempts, first.attempt);
      this.dropped = first.dropped;
      // Not asked for, the attempt read is the latest that wrote a line: the ones after it
      // (the job's latest) wrote nothing, which is said, not passed over.
      if (!options.attempt && this.attempt < this.attempts) this.silent = this.attempt + 1;
      this.attemptsChanged();
      this.marked = options.line || null;
      const ended = ENDED.includes(this.state);
      // the newest lines are in view: the latest attempt's, or those before a silent one
      const latest = this.attempt === this.attempts || this.silent > 0;
      const follows = !ended && latest && !options.line;
      if (options.line) this.reveal(options.line - 1, "start");
      else if (this.state === "failed" || follows) this.toEnd();  // the failure, the news
      else this.render(true);
      element("log-state").textContent = ended ? "ended" : "";
      element("log-follow").checked = follows;
      element("log-follow").disabled = ended || !latest;
      if (follows) this.follow();
      this.panel.dispatchEvent(new CustomEvent("flows:log-opened", {
        bubbles: true, detail: { jid, attempt: this.attempt, chosen: !!options.chosen },
      }));
      const find = element("log-find");
      if (find.value) this.search(find.value);
      this.loadAll(gen);
    }

    // One page from the API into this.lines; null when a newer open superseded it.
    async fetch(gen, attempt, offset, limit) {
      const query = new URLSearchParams({ offset: String(offset), limit: String(limit) });
      if (attempt) query.set("attempt", String(attempt));
      let reply = null;
      try {
        reply = await fetch(`/api/v1/jobs/${encodeURIComponent(this.jid)}/logs?${query}`,
          { credentials: "omit" });
      } catch (error) { reply = null; }
      if (gen !== this.gen) return null;
      if (!reply || !reply.ok) {
        const said = await refusal(reply);
        if (gen === this.gen) element("log-state").textContent = said;
        return null;
      }
      const page = await reply.json();
      if (gen !== this.gen) return null;
      if (this.attempt && page.attempt !== this.attempt) return page;
      page.items.forEach((line, i) => { this.lines[page.offset + i] = line; });
      this.total = Math.max(this.total, page.total, page.offset + page.items.length);
      this.counted();
      return page;
    }

    // Fetches every line not fetched yet, the ones in view (or waited for) first, a page at a
    // time, one request at once: the page stays responsive while a big log comes in.
    async loadAll(gen) {
      if (this.loading) return;
      this.loading = gen;
      try {
        for (;;) {
          if (gen !== this.gen) return;
          const from = this.missing();
          if (from < 0) break;
          const page = await this.fetch(gen, this.attempt, from, PAGE);
          if (page === null) return;
          if (page.items.length === 0 || page.attempt !== this.attempt) {
            this.exhausted = true;  // the log changed under us (deleted, replaced): no retry
            break;
          }
          this.render(false);
          if (this.wanted !== null && this.lines[this.wanted] !== undefined) this.settle();
        }
      } finally {
        if (this.loading === gen) this.loading = null;
      }
      if (this.query) this.search(this.query);
      this.counted();
    }

    // The first line to fetch next: the view's, a wanted line's, else the first missing.
    missing() {
      const look = (from, to) => {
        for (let i = Math.max(0, from); i < Math.min(to, this.total); i++) {
          if (this.lines[i] === undefined) return i;
        }
        return -1;
      };
      if (this.wanted !== null) {
        const found = look(this.wanted - OVERSCAN, this.wanted + OVERSCAN);
        if (found >= 0) return found;
      }
      const [first, last] = this.range();
      const seen = look(first, last);
      return seen >= 0 ? seen : look(0, this.total);
    }

    loaded() {
      let count = 0;
      for (let i = 0; i < this.total; i++) if (this.lines[i] !== undefined) count++;
      return count;
    }

    counted() {
      const parts = [`${this.total.toLocaleString("en")} line${this.total === 1 ? "" : "s"}`];
      if (this.attempts > 1 && this.attempt > 0) parts.push(`attempt ${this.attempt} of ${this.attempts}`);
      const quiet = this.silence();
      if (quiet) parts.push(quiet);
      if (this.dropped) parts.push(`${this.dropped.toLocaleString("en")} more dropped (over the log's budget)`);
      element("log-count").textContent = parts.join(" · ");
    }

    // What the latest attempts that wrote nothing are said as ("" when none is known): the
    // job's attempts from this.silent on, or the one chosen once it has no line.
    silence() {
      const ended = this.finished || ENDED.includes(this.state);
      let from = this.silent;
      if (!from && this.attempt === this.attempts && this.total === 0) from = this.attempt;
      if (this.attempts < 2 || !from || from > this.attempts) return "";
      const which = from === this.attempts ? `the latest attempt (${from})`
        : `attempts ${from} to ${this.attempts} (the latest)`;
      if (ended) return `${which} wrote nothing`;
      return `${which} ${from === this.attempts ? "has" : "have"} written nothing yet`;
    }

    attemptsChanged() {
      const select = element("log-attempt");
      select.replaceChildren();
      for (let n = 1; n <= this.attempts; n++) {
        const option = document.createElement("option");
        option.value = String(n);
        option.textContent = n === this.attempts ? `${n} (latest)` : String(n);
        option.selected = n === (this.attempt || this.attempts);  // none wrote: the latest
        select.append(option);
      }
      element("log-attempt-box").hidden = this.attempts <= 1;
      const download = element("log-download");
      download.hidden = this.attempt === 0;
      download.href = `/api/v1/jobs/${encodeURIComponent(this.jid)}/logs/raw?attempt=${this.attempt}`;
    }

    // -- drawing --------------------------------------------------------------------------------

    height() { return Math.min(this.total * ROW, MAX_HEIGHT); }

    // The first line at the top of the view, and the count of lines the view holds.
    range() {
      const inView = Math.ceil(this.view.clientHeight / ROW) + 1;
      const height = this.height();
      let top;
      if (height < this.total * ROW) {  // scaled: the scroll position is a fraction of the log
        const room = Math.max(1, height - this.view.clientHeight);
        top = Math.floor((this.view.scrollTop / room) * Math.max(0, this.total - inView + 1));
      } else {
        top = Math.floor(this.view.scrollTop / ROW);
      }
      top = Math.max(0, Math.min(top, Math.max(0, this.total - 1)));
      return [top, Math.min(this.total, top + inView)];
    }

    scrollTopOf(index) {
      const height = this.height();
      if (height < this.total * ROW) {
        const inView = Math.ceil(this.view.clientHeight / ROW) + 1;
        const room = Math.max(1, height - this.view.clientHeight);
        return (index / Math.max(1, this.total - inView + 1)) * room;
      }
      return index * ROW;
    }

    // Draws at the next frame (once, however many lines came meanwhile); `toEnd` keeps the
    // view at the end, as when following.
    schedule(toEnd) {
      if (toEnd) this.endWanted = true;
      if (this.frame) return;
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        this.counted();
        if (this.endWanted) { this.endWanted = false; this.toEnd(); } else this.render(false);
      });
    }

    render(force) {
      this.spacer.style.height = this.height() + "px";
      const [top, bottom] = this.range();
      const from = Math.max(0, top - OVERSCAN), to = Math.min(this.total, bottom + OVERSCAN);
      let missing = false;
      for (let i = from; i < to && !missing; i++) missing = this.lines[i] === undefined;
      const key = `${from}:${to}:${this.query}:${this.current}:${this.marked}:${missing}`;
      if (!force && key === this.drawn && !missing) return;
      this.drawn = key;
      const scaled = this.height() < this.total * ROW;
      this.rows.style.top = (scaled ? this.view.scrollTop - (top - from) * ROW : from * ROW) + "px";
      const fragment = document.createDocumentFragment();
      const hit = this.current >= 0 ? this.matches[this.current] : null;
      for (let i = from; i < to; i++) fragment.append(this.row(i, hit));
      this.rows.replaceChildren(fragment);
      if (missing && this.jid && !this.loading && !this.exhausted) this.loadAll(this.gen);
    }

    row(i, hit) {
      const row = document.createElement("div");
      const line = this.lines[i];
      row.dataset.n = String(i + 1);
      if (line === undefined) {
        row.className = "line pending";
        row.textContent = "…";
        return row;
      }
      row.className = "line " + (line.stream || "");
      if (i + 1 === this.marked) row.classList.add("marked");
      if (hit && hit.line === i) row.classList.add("current");
      if (this.times && line.time) {
        const time = document.createElement("span");
        time.className = "time";
        time.textContent = new Date(line.time * 1000).toISOString().slice(11, 23) + " ";
        time.title = new Date(line.time * 1000).toISOString();
        row.append(time);
      }
      if (line.level) {
        const level = document.createElement("span");
        level.className = "level level-" + String(line.level).toLowerCase();
        level.textContent = line.level + " ";
        row.append(level);
      }
      draw(row, parse(line.text), this.query ? this.marks(i) : []);
      return row;
    }

    marks(i) {
      const text = this.plainOf(i).toLowerCase(), query = this.query.toLowerCase();
      const out = [];
      for (let at = text.indexOf(query); at >= 0; at = text.indexOf(query, at + query.length)) {
        out.push([at, at + query.length]);
      }
      return out;
    }

    plainOf(i) {
      if (this.plains[i] === undefined) this.plains[i] = plain(this.lines[i].text);
      return this.plains[i];
    }

    atEnd() { return this.view.scrollTop + this.view.clientHeight >= this.view.scrollHeight - ROW; }

    toEnd() {
      this.render(true);
      this.view.scrollTop = this.view.scrollHeight;
      this.render(false);
    }

    // Scrolls line `index` into view (`where`: "start" a little below the top, else centred).
    reveal(index, where) {
      this.wanted = index;
      const offset = where === "start" ? 3 * ROW : this.view.clientHeight / 2 - ROW;
      this.render(true);
      this.view.scrollTop = Math.max(0, this.scrollTopOf(index) - offset);
      this.render(true);
      if (this.lines[index] !== undefined) this.settle();
    }

    settle() { this.wanted = null; }

    clicked(e) {
      const row = e.target.closest(".line");
      if (!row || !row.dataset.n) return;
      // the line number is the row's ::before, left of its text: a click there links the line
      const gutter = row.getBoundingClientRect().left + parseFloat(getComputedStyle(row).paddingLeft);
      if (e.clientX > gutter) return;
      this.marked = Number(row.dataset.n);
      this.render(true);
      this.panel.dispatchEvent(new CustomEvent("flows:log-line", {
        bubbles: true, detail: { jid: this.jid, attempt: this.attempt, line: this.marked },
      }));
    }

    // -- search ---------------------------------------------------------------------------------

    // Finds `query` (any case) in every line, SEARCH_SLICE lines a task so that typing and
    // scrolling go on meanwhile, saying how far it got; the lines not fetched yet are fetched,
    // then searched.
    async search(query) {
      const token = this.searchToken = (this.searchToken || 0) + 1;
      this.query = query;
      this.matches = [];
      this.current = -1;
      const label = element("log-matches");
      if (!query) { label.removeAttribute("aria-busy"); label.textContent = ""; this.render(true); return; }
      label.setAttribute("aria-busy", "true");  // a screen reader says the result, not each step
      const lower = query.toLowerCase();
      const found = [];
      for (let i = 0; i < this.total; i++) {
        if (i > 0 && i % SEARCH_SLICE === 0) {
          label.textContent = `searching: ${i.toLocaleString("en")} of ${this.total.toLocaleString("en")} lines`;
          await new Promise((resolve) => setTimeout(resolve, 0));
          if (token !== this.searchToken) return;
        }
        if (this.lines[i] === undefined) continue;
        const text = this.plainOf(i).toLowerCase();
        for (let at = text.indexOf(lower); at >= 0; at = text.indexOf(lower, at + lower.length)) {
          found.push({ line: i, at });
        }
      }
      this.matches = found;
      const count = found.length;
      const complete = this.loaded() >= this.total || this.exhausted;
      if (!complete) this.loadAll(this.gen);
      label.textContent = (count ? `${count.toLocaleString("en")} match${count === 1 ? "" : "es"}` : "no match")
        + (complete ? "" : " so far (loading the rest)");
      label.removeAttribute("aria-busy");
      if (count) this.step(1);
      else this.render(true);
    }

    step(direction) {
      if (!this.matches.length) return;
      this.current = (this.current + direction + this.matches.length) % this.matches.length;
      if (this.current < 0) this.current = 0;
      const hit = this.matches[this.current];
      const count = this.matches.length;
      element("log-matches").textContent = `${this.current + 1} of ${count.toLocaleString("en")}`;
      this.reveal(hit.line, "centre");
    }

    // -- following --------------------------------------------------------------------------------

    follow() {
      if (this.stream || !this.jid) return;
      const gen = this.gen;
      this.streamCounts = {};
      const stream = new EventSource(`/api/v1/jobs/${encodeURIComponent(this.jid)}/logs/stream`);
      this.stream = stream;
      element("log-state").textContent = "following";
      // The stream starts at the attempt's first line (and again after a reconnect): lines
      // already here are counted and skipped.
      stream.addEventListener("open", () => { this.streamCounts = {}; });
      stream.addEventListener("line", (e) => {
        if (gen !== this.gen) return;
        const line = JSON.parse(e.data);
        const attempt = Number(line.attempt) || 1;
        const index = this.streamCounts[attempt] || 0;
        this.streamCounts[attempt] = index + 1;
        if (attempt > this.attempt) {  // a retry began: its log is the one followed now
          this.lines = []; this.plains = []; this.total = 0; this.matches = [];
          this.attempt = attempt; this.attempts = Math.max(this.attempts, attempt);
          if (this.silent && attempt >= this.silent) this.silent = attempt < this.attempts ? attempt + 1 : 0;
          this.attemptsChanged();
        }
        if (attempt !== this.attempt || index < this.total) return;
        const stick = this.endWanted || this.atEnd();
        this.lines[index] = line;
        this.total = index + 1;
        if (this.query && this.plainOf(index).toLowerCase().includes(this.query.toLowerCase())) {
          this.matches.push({ line: index, at: 0 });
        }
        this.schedule(stick);
      });
      stream.addEventListener("end", () => {
        this.finished = true;
        this.counted();
        this.unfollow("ended");
        element("log-follow").checked = false;
        element("log-follow").disabled = true;
      });
      stream.onerror = () => { if (this.stream === stream) element("log-state").textContent = "reconnecting"; };
    }

    unfollow(state) {
      if (this.stream) { this.stream.close(); this.stream = null; }
      if (state !== "") element("log-state").textContent = state;
    }
  }

  // A page naming one job's log (the job page) opens it at once; its URL names the attempt
  // chosen and the line linked (?attempt=N&line=L), as the run page's does.
  function openNamed(named) {
    const query = new URLSearchParams(location.search);
    const number = (key) => Number(query.get(key)) || undefined;
    const keep = (changes) => {
      for (const [key, value] of Object.entries(changes)) {
        if (value) query.set(key, String(value)); else query.delete(key);
      }
      const text = query.toString();
      history.replaceState(null, "", location.pathname + (text ? "?" + text : ""));
    };
    viewer.panel.addEventListener("flows:log-opened", (e) => {
      if (e.detail.chosen) keep({ attempt: e.detail.attempt, line: null });
    });
    viewer.panel.addEventListener("flows:log-line", (e) => keep({ attempt: e.detail.attempt, line: e.detail.line }));
    viewer.open(named.dataset.openLog, {
      state: named.dataset.logState, attempt: number("attempt"), line: number("line"),
    });
  }

  let viewer = null;
  document.addEventListener("DOMContentLoaded", () => {
    const panel = element("log-panel");
    if (panel) viewer = new Viewer(panel);
    const named = document.querySelector("[data-open-log]");
    if (viewer && named) openNamed(named);
  });

  window.FlowsLog = {
    parse,
    plain,
    // Opens a job's log in the page's viewer (see Viewer.open).
    open(jid, options) { if (viewer) return viewer.open(jid, options); return null; },
    get viewer() { return viewer; },
  };
})();
