"""The built docs site looked at in a real browser: headless Chromium (Debian's ``chromium``, which ``make browser``
installs; ``make test`` runs it first) driven by playwright loads the home page, an env page, a paper page and the
leaderboard from a local HTTP server and checks what a reader would see: no console error or uncaught exception,
no failed request, no broken image, no link to a missing page or anchor, every markdown table rendered as a
``<table>``. A screenshot of each page is kept in ``$CLUSTERGYM_ARTIFACTS/site-screenshots`` (CI sets it to a
folder under runs/), else in the test's tmp folder.

Skips, saying why, where Chromium or playwright is missing (``make browser`` could not install it: no root, no
package source)."""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest
from tests.helpers import ROOT

DOCS = os.path.join(str(ROOT), "docs")
PAGES = ("index.html", "envs/MultiServerChannel-v0.html", "opm.html", "leaderboard.html")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
CHROMIUM = os.environ.get("CLUSTERGYM_CHROMIUM", "/usr/bin/chromium")

# Per page, in the browser: images not loaded, same-site links, ids, tables, and text (outside code) holding a
# markdown table's delimiter row: a table the markdown did not turn into one.
PAGE_REPORT = """() => ({
  brokenImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id),
  tables: document.querySelectorAll('article table').length,
  rawTableRows: [...document.querySelectorAll('article p, article li, article td, article dd')]
      .map(e => e.textContent).filter(t => /\\|\\s*:?-{3,}:?\\s*\\|/.test(t)),
})"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # the browser closing a connection it no longer needs
        pass


@pytest.fixture
def site_server(built_site):
    assert built_site.returncode == 0, built_site.stderr[-3000:]
    handler = functools.partial(_Quiet, directory=str(built_site.path))
    server = _Server(("127.0.0.1", 0), handler)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", built_site.path
    server.shutdown()
    server.server_close()


def _artifacts(tmp_path) -> str:
    root = os.environ.get("CLUSTERGYM_ARTIFACTS")
    out = os.path.join(root, "site-screenshots") if root else str(tmp_path / "site-screenshots")
    os.makedirs(out, exist_ok=True)
    return out


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _link_problems(base: str, links: list[str], ids_of) -> list[str]:
    """Same-site links whose page is missing, or whose #anchor is not an id of the page it points to."""
    bad = []
    for href in sorted(set(links)):
        if not href.startswith(base):
            continue
        url, _, frag = href.partition("#")
        if _status(url) != 200:
            bad.append(f"{href}: HTTP {_status(url)}")
        elif frag and url.endswith(".html") and urllib.parse.unquote(frag) not in ids_of(url):
            bad.append(f"{href}: no element with id {frag!r}")
    return bad


def _ids_reader(base: str, site):
    @functools.lru_cache(maxsize=None)
    def ids_of(url: str) -> frozenset:
        with open(os.path.join(site, urllib.parse.unquote(url[len(base):])), encoding="utf-8") as f:
            return frozenset(re.findall(r'\sid="([^"]+)"', f.read()))
    return ids_of


def _markdown_tables(page: str) -> int:
    """Tables in the page's markdown source (docs/<page>.md): delimiter rows (``|---|---|``) outside code fences."""
    path = os.path.join(DOCS, page.replace(".html", ".md"))
    n, fenced = 0, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif not fenced and re.match(r"^\s*\|?\s*:?-{3,}:?\s*\|", line):
                n += 1
    return n


def test_site_pages_render_in_headless_chromium(site_server, tmp_path):
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"no Chromium at {CHROMIUM}: `make browser` installs Debian's chromium (needs root and apt)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[docs]'")
    base, site = site_server
    shots = _artifacts(tmp_path)
    ids_of = _ids_reader(base, site)
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            for page_name in PAGES:
                problems += _check_page(browser, base + page_name, page_name, shots, ids_of, base)
        finally:
            browser.close()
    assert not problems, "\n".join(problems)
    assert sorted(os.listdir(shots)) == sorted(p.replace("/", "_").replace(".html", ".png") for p in PAGES)


def _check_page(browser, url: str, name: str, shots: str, ids_of, base: str) -> list[str]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen: list[str] = []
    page.on("console", lambda m: seen.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: seen.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: seen.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    try:
        resp = page.goto(url, wait_until="networkidle")
        assert resp is not None and resp.status == 200, f"{url}: {resp and resp.status}"
        page.wait_for_timeout(300)  # MathJax typesets after load
        report = page.evaluate(PAGE_REPORT)
        page.screenshot(path=os.path.join(shots, name.replace("/", "_").replace(".html", ".png")), full_page=True)
    finally:
        context.close()
    out = [f"{name}: {s}" for s in seen]
    out += [f"{name}: broken image {src}" for src in report["brokenImages"]]
    out += [f"{name}: markdown table left as text: ...{row[max(0, row.find('|-') - 60):][:120]}"
            for row in report["rawTableRows"]]
    out += [f"{name}: link {p}" for p in _link_problems(base, report["links"], ids_of)]
    want = _markdown_tables(name)
    if report["tables"] < max(want, 1):
        out.append(f"{name}: {report['tables']} <table> elements rendered, the markdown has {want} tables")
    return out
