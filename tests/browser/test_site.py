"""The documentation site, read in the browser: built once (as `make docs` builds it, warnings
failing the build) into a temporary folder, served on 127.0.0.1, and read page by page at a laptop's
1280 px and a phone's 390 px."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import posixpath
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import nbformat
import pytest

from chromium import require

pytestmark = pytest.mark.xdist_group("browser")

REPO = Path(__file__).parent.parent.parent
DOCS = REPO / "docs"
PHONE = {"width": 390, "height": 844}
BUILD_TIMEOUT_S = 300
BINDER = "https://mybinder.org/v2/gh/tapekit/tapekit/main?urlpath=lab/tree/notebooks/{file}"

PAGE_FACTS_JS = """() => ({
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
        .concat([...document.querySelectorAll('a[name]')].map(a => a.name)),
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
})"""

# A widget shown as its repr instead of a view.
WIDGET_REPR = re.compile(r"\b(VBox|HBox|Box|IntProgress|FloatProgress|IntSlider|Output)\(")

# Every picture in a tutorial's outputs, and whether the browser decoded it with a size.
PICTURES_JS = """async () => {
    const imgs = [...document.querySelectorAll('.cell_output img')];
    await Promise.all(imgs.map(i => i.decode().catch(() => null)));
    return imgs.map(i => ({src: i.src.slice(0, 60), shown: i.complete && i.naturalWidth > 0 && i.naturalHeight > 0}));
}"""


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The built site's folder."""
    if importlib.util.find_spec("myst_nb") is None:
        require("the docs packages are missing: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    build = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", str(DOCS),
                            str(out / "html"), "-d", str(out / "doctrees")],
                           capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT_S)
    assert build.returncode == 0, f"the site's build failed:\n{build.stdout}\n{build.stderr}"
    return out / "html"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    """A server that lets the browser drop a connection it no longer needs without a traceback."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def server(site):
    """The site's address, served from its folder on 127.0.0.1 for the session."""
    httpd = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


class Reader:
    """One browser tab on the site, keeping every console error, page error and failed request. The
    site must read with no network: a request for anything not on the site is refused and kept too."""

    def __init__(self, tab, root: str):
        self.tab, self.root, self.errors = tab, root, []
        tab.route(re.compile(r"^(?!" + re.escape(root) + r"|data:)"), self.refuse)
        tab.on("console", lambda message: message.type == "error" and self.errors.append(
            f"{tab.url}: console: {message.text}"))
        tab.on("pageerror", lambda error: self.errors.append(f"{tab.url}: {error}"))
        tab.on("requestfailed", self.failed)
        tab.on("response", lambda response: response.status >= 400 and self.errors.append(
            f"{tab.url}: {response.status} for {response.url}"))

    def failed(self, request) -> None:
        """A request that failed, unless leaving the page for the next one cancelled it."""
        if request.failure != "net::ERR_ABORTED":
            self.errors.append(f"{self.tab.url}: failed to load {request.url}: {request.failure}")

    def refuse(self, route) -> None:
        self.errors.append(f"{self.tab.url}: asked the network for {route.request.url}")
        route.abort()

    def open(self, path: str) -> dict:
        self.tab.goto(urljoin(self.root, path), wait_until="load")
        return self.tab.evaluate(PAGE_FACTS_JS)


@pytest.fixture
def reader(chromium, server):
    tab = chromium.new_page()
    try:
        yield Reader(tab, server)
    finally:
        tab.close()


def site_pages(site: Path) -> list[str]:
    """Every page of the site (the theme's files under _static are not pages)."""
    return sorted(path.relative_to(site).as_posix() for path in site.rglob("*.html")
                  if not path.relative_to(site).as_posix().startswith("_static/"))


def tutorials() -> list[Path]:
    return sorted((REPO / "notebooks").glob("*.ipynb"))


def test_every_page_loads_cleanly_and_every_internal_link_resolves(reader, site, server):
    """Crawl from the index (and the search and index pages, which forms reach): no console error, no
    broken link or anchor, every page reached, and nothing wider than a 1280 px window."""
    facts, todo, broken = {}, ["index.html", "search.html", "genindex.html"], []
    while todo:
        path = todo.pop()
        if path in facts:
            continue
        facts[path] = reader.open(path)
        for link in facts[path]["links"]:
            target, _ = urldefrag(link)
            if target.startswith(server) and target.endswith(".html"):
                todo.append(target[len(server):])
    for path, page in facts.items():
        for link in page["links"]:
            target, anchor = urldefrag(link)
            if not target.startswith(server):
                continue
            local = urlparse(target).path.lstrip("/") or "index.html"
            if not (site / local).is_file():
                broken.append(f"{path} links to {local}, which is not in the site")
            elif anchor and local.endswith(".html") and anchor not in facts.get(local, {}).get("ids", []):
                broken.append(f"{path} links to {local}#{anchor}, which has no such anchor")
    assert not reader.errors, "\n".join(reader.errors)
    assert not broken, "\n".join(sorted(set(broken)))
    assert set(site_pages(site)) <= set(facts), f"pages no link reaches: {set(site_pages(site)) - set(facts)}"
    too_wide = [f"{path}: {p['scrollWidth']} px" for path, p in facts.items() if p["scrollWidth"] > p["innerWidth"]]
    assert not too_wide, f"wider than the 1280 px window:\n" + "\n".join(too_wide)


def test_nothing_is_wider_than_a_phone(reader, site):
    reader.tab.set_viewport_size(PHONE)
    too_wide = []
    for path in site_pages(site):
        page = reader.open(path)
        if page["scrollWidth"] > page["innerWidth"]:
            too_wide.append(f"{path}: {page['scrollWidth']} px")
    assert not reader.errors, "\n".join(reader.errors)
    assert not too_wide, f"wider than a {PHONE['width']} px phone:\n" + "\n".join(too_wide)


def saved_pictures(notebook: nbformat.NotebookNode) -> int:
    """How many pictures the site shows for the notebook's saved outputs: one per PNG or SVG output,
    and each <img> of an HTML output (a widget's static view), which the site prefers."""
    count = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                count += len(re.findall(r"<img\b", "".join(data["text/html"])))
            elif "image/png" in data or "image/svg+xml" in data:
                count += 1
    return count


@pytest.mark.parametrize("notebook", tutorials(), ids=lambda path: path.stem)
def test_each_tutorial_shows_its_pictures_and_a_binder_link(reader, notebook):
    """Every saved picture decoded with a size, each widget as its saved view, never its repr."""
    reader.open(f"tutorials/{notebook.stem}.html")
    outputs = reader.tab.locator(".cell_output").all_inner_texts()
    assert not [text for text in outputs if WIDGET_REPR.search(text)]
    pictures = reader.tab.evaluate(PICTURES_JS)
    assert len(pictures) == saved_pictures(nbformat.read(notebook, as_version=4))
    assert all(picture["shown"] for picture in pictures), [p["src"] for p in pictures if not p["shown"]]
    assert reader.tab.locator(f'a[href="{BINDER.format(file=notebook.name)}"]').count() == 1
    assert not reader.errors, "\n".join(reader.errors)


@pytest.mark.parametrize("word, found", [("detach", "tapekit.Tensor.detach"), ("UnionTape", "tapekit.UnionTape")])
def test_search_finds(reader, word, found):
    """Typed into the search box of the index page, the word finds its API entry."""
    reader.open("index.html")
    reader.tab.locator("button.search-button-field:visible").first.click()
    box = reader.tab.locator("input[name='q']:visible").first
    box.fill(word)
    box.press("Enter")
    reader.tab.wait_for_url(re.compile(r"search\.html\?q="))
    results = reader.tab.locator("#search-results ul.search li a")
    results.first.wait_for()
    assert any(href.endswith(f"#{found}") for href in results.evaluate_all("links => links.map(a => a.href)"))
    assert not reader.errors, "\n".join(reader.errors)


def test_every_public_name_has_an_entry(site):
    """Every name of tk.__all__, tk.nn, tk.optim, tk.viz and tk.widgets is documented on the site."""
    from sphinx.util.inventory import InventoryFile

    import tapekit as tk

    with open(site / "objects.inv", "rb") as stream:
        inventory = InventoryFile.load(stream, "", posixpath.join)  # {object type: {name: entry}}
    documented = {name for entries in inventory.values() for name in entries}
    wanted = {f"tapekit.{name}" for name in tk.__all__}
    for module in (tk.nn, tk.viz, tk.widgets):
        wanted |= {f"tapekit.{name}" if getattr(tk, name, None) is getattr(module, name)
                   else f"{module.__name__}.{name}" for name in module.__all__}
    wanted |= {"tapekit.optim.Sgd", "tapekit.optim.Adam", "tapekit.optim.Optimizer"}
    missing = sorted(wanted - documented)
    assert not missing, f"public names without an entry (list their module on a page under docs/api/): {missing}"
