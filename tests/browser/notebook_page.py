"""A notebook open in JupyterLab, driven the way a reader drives it: through menus, keys and clicks.

`NotebookPage.run_all()` runs every cell from the Run menu, waits until every cell has run, saves the
notebook (the server holds a throwaway copy) and returns what the page holds as a notebook, so that
`problems()` can hold each output of that model against what the page rendered for it.
"""

from __future__ import annotations

import re
import time

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KERNEL_START_TIMEOUT_S = 90.0
RUN_TIMEOUT_S = 240.0
SAVE_TIMEOUT_S = 30.0
WIDGET_TIMEOUT_S = 30.0
# DOT source on the page: a picture shown as text instead of SVG (Graphviz's fallback).
DOT_SOURCE = re.compile(r"\bdigraph\b[^{\n]*\{")

# The status bar's kernel item reads "<kernel name> | <status>".
KERNEL_IDLE_JS = """() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
    .some(e => /\\| Idle$/.test(e.innerText.trim()) && !e.innerText.startsWith('No Kernel'))"""

# Every cell has run: the kernel is idle, no cell is running or queued ([*]), and at least one cell ran
# (run-all marks every queued cell [*] at once, and leaves the rest [ ] when a cell fails).
RUN_DONE_JS = """(idle) => {
    const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
        .map(e => e.innerText.trim());
    return prompts.length === 0 || (idle() && !prompts.some(p => p.includes('*'))
        && prompts.some(p => /^\\[\\d+\\]:$/.test(p)));
}"""

WIDGETS_SETTLED_JS = "() => !document.querySelector('.jp-Notebook').innerText.includes('Loading widget...')"

# What the page rendered for each cell: per output of the cell's own output area (not outputs nested
# in an Output widget), its text, whether it holds a widget view drawn with a size, how many interactive
# controls (sliders, dropdowns, buttons, inputs) it shows and how many of them have a size, and how
# many SVG pictures it holds (inline, or as an <img> of an SVG document).
CELLS_JS = """() => {
    const sized = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
    const inputs = 'input, select, button, textarea, [role=slider]';
    return [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(cell => {
        const area = cell.querySelector('.jp-Cell-outputArea');
        const children = area ? [...area.children].filter(c => c.classList.contains('jp-OutputArea-child')) : [];
        return {
            prompt: (cell.querySelector('.jp-InputPrompt') || {innerText: ''}).innerText.trim(),
            outputs: children.map(child => {
                const views = [...child.querySelectorAll('.jupyter-widgets')]
                    .filter(w => [...w.classList].some(c => c.startsWith('widget-')));
                const controls = views.filter(w => !w.classList.contains('widget-container')
                                                   && w.querySelector(inputs));
                const svgImages = [...child.querySelectorAll('img')]
                    .filter(img => img.src.startsWith('data:image/svg+xml') && img.naturalWidth > 0);
                return {
                    text: child.innerText,
                    widget: views.some(sized),
                    controls: controls.length,
                    shown: controls.filter(sized).length,
                    svgs: child.querySelectorAll('svg').length + svgImages.length,
                };
            }),
        };
    });
}"""


class NotebookPage:
    """The notebook at ``path`` (relative to the server's root) in a browser page."""

    def __init__(self, page, server, path: str):
        self.page = page
        self.server = server
        self.path = path

    def open(self) -> "NotebookPage":
        """Open the notebook in a reset workspace and wait for its kernel to be idle."""
        self.page.goto(self.server.url(f"lab/tree/{self.path}?reset"))
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=KERNEL_START_TIMEOUT_S * 1000)
        self.page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_START_TIMEOUT_S * 1000)
        return self

    def menu(self, menu: str, command: str) -> None:
        """Click ``command`` (its id, such as ``runmenu:run-all``) in the menu bar's ``menu``."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{menu}$")).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def run_all(self, timeout_s: float = RUN_TIMEOUT_S) -> nbformat.NotebookNode:
        """Clear the outputs, run all cells, wait until every cell has run; the notebook as the page holds it."""
        self.menu("Edit", "editmenu:clear-all")
        self.menu("Run", "runmenu:run-all")
        self.page.wait_for_function(f"() => ({RUN_DONE_JS})({KERNEL_IDLE_JS})", timeout=timeout_s * 1000,
                                    polling=250)
        self.settle_widgets()
        return self.save()

    def settle_widgets(self) -> None:
        """Give widget views time to find their models; any still loading after that is a fault for `problems`."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.page.wait_for_function(WIDGETS_SETTLED_JS, timeout=WIDGET_TIMEOUT_S * 1000, polling=250)
        except PlaywrightTimeout:
            pass

    def save(self) -> nbformat.NotebookNode:
        """Save from the File menu and read back what the page wrote."""
        file = self.server.root / self.path
        before = file.stat().st_mtime_ns
        self.menu("File", "docmanager:save")
        deadline = time.monotonic() + SAVE_TIMEOUT_S
        while True:
            if file.stat().st_mtime_ns != before:
                try:
                    return nbformat.read(file, as_version=4)
                except nbformat.reader.NotJSONError:
                    pass  # still being written
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.path} was not saved within {SAVE_TIMEOUT_S:.0f} s")
            time.sleep(0.1)

    def rendered_cells(self) -> list[dict]:
        return self.page.evaluate(CELLS_JS)

    def problems(self, model: nbformat.NotebookNode) -> list[str]:
        """Every way the page fails the notebook ``model``: cells not run, errors, widgets or DAGs not rendered."""
        found = []
        if "Error displaying widget" in self.page.inner_text("body"):
            found.append('the page shows "Error displaying widget"')
        cells = self.rendered_cells()
        if len(cells) != len(model.cells):
            return found + [f"the page shows {len(cells)} cells, the notebook has {len(model.cells)}"]
        for number, (cell, shown) in enumerate(zip(model.cells, cells), 1):
            if cell.cell_type == "code":
                found += [f"cell {number}: {p}" for p in cell_problems(cell, shown)]
        return found


def cell_problems(cell: nbformat.NotebookNode, shown: dict) -> list[str]:
    """How one code cell of the model and its rendering on the page fall short."""
    if not cell.source.strip():
        return []
    if cell.get("execution_count") is None:
        return [f"did not run (prompt {shown['prompt']!r})"]
    found = []
    expected_error = "raises-exception" in cell.metadata.get("tags", [])
    for out in cell.outputs:
        if out.output_type == "error" and not expected_error:
            found.append(f"raised {out.ename}: {out.evalue}")
    if len(shown["outputs"]) != len(cell.outputs):
        return found + [f"the page shows {len(shown['outputs'])} outputs, the notebook holds {len(cell.outputs)}"]
    for out, view in zip(cell.outputs, shown["outputs"]):
        found += output_problems(out, view)
    return found


def output_problems(out: nbformat.NotebookNode, view: dict) -> list[str]:
    data = out.get("data", {})
    found = []
    if WIDGET_VIEW in data:
        if not view["widget"]:
            found.append(f"a widget is not rendered; the page shows {view['text'][:200]!r}")
        if view["shown"] < view["controls"]:
            found.append(f"{view['controls'] - view['shown']} of {view['controls']} widget controls have no size")
    if "image/svg+xml" in data and view["svgs"] == 0:
        found.append(f"an SVG picture is not rendered; the page shows {view['text'][:200]!r}")
    if DOT_SOURCE.search(view["text"]):
        found.append(f"a picture is shown as DOT source instead of SVG: {view['text'][:200]!r}")
    return found


# The nodes of a Graphviz SVG: how many, and the fill colours of their shapes.
GRAPH_JS = """svg => {
    const nodes = [...svg.querySelectorAll('g.node')];
    const fills = nodes.flatMap(n => [...n.querySelectorAll('polygon, ellipse, path')]
        .map(s => (s.getAttribute('fill') || '').toLowerCase()))
        .filter(f => f && f !== 'none' && f !== 'white' && f !== '#ffffff' && f !== 'transparent');
    return {nodes: nodes.length, fills: [...new Set(fills)].sort()};
}"""


def graph_state(svg) -> dict:
    """``{"nodes": n, "fills": [...]}`` of the Graphviz SVG at locator ``svg``."""
    return svg.evaluate(GRAPH_JS)


def wait_for(probe, until, timeout_s: float = 60.0, what: str = "the page to change"):
    """Poll ``probe()`` until ``until(value)`` holds; the last value, or AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:.0f} s for {what}; last seen: {value!r}")
        time.sleep(0.1)


# -- fit and readability ---------------------------------------------------------------------------

# The SVG document of an <img>'s data: URL (JupyterLab shows image/svg+xml outputs that way).
SVG_OF_IMG_JS = """
        const parsed = src => {  // the SVG document of a data: URL (base64 or URL-encoded)
            const comma = src.indexOf(','), head = src.slice(0, comma), body = src.slice(comma + 1);
            const text = head.endsWith(';base64')
                ? new TextDecoder().decode(Uint8Array.from(atob(body), c => c.charCodeAt(0))) : decodeURIComponent(body);
            return new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
        };"""

# How each output area of the notebook sits in its cell: its scroll and client widths, each output's,
# and the elements inside that reach past its right edge (a child clipped by an overflow:hidden box
# does not widen the area's scrollWidth, but it is cut off all the same). SVG pictures: the smallest
# text they show, in CSS pixels (font-size in user units times the drawn scale); images: drawn
# narrower than their natural width (a shrunk PNG shrinks its text).
FIT_JS = """() => {""" + SVG_OF_IMG_JS + """
    const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
    return cells.map((cell, index) => {
        const area = cell.querySelector('.jp-Cell-outputArea');
        if (!area || !area.children.length) return null;
        const edge = area.getBoundingClientRect().right;
        const name = e => e.tagName.toLowerCase() + [...e.classList].slice(0, 3).map(c => '.' + c).join('');
        const past = [...area.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > edge + 1)
            .filter(e => !e.closest('svg') || e.tagName.toLowerCase() === 'svg').map(name);
        const outputs = [...area.querySelectorAll('.jp-OutputArea-output')]
            .filter(o => o.scrollWidth > o.clientWidth + 1).map(o => `${name(o)} ${o.scrollWidth} > ${o.clientWidth}`);
        const smallest = (svg, width) => {  // the smallest text of an SVG drawn ``width`` CSS px wide, in px
            const box = (svg.getAttribute('viewBox') || '').split(/[\\s,]+/).map(Number);
            const sizes = [...svg.querySelectorAll('text[font-size]')].map(t => parseFloat(t.getAttribute('font-size')));
            return box.length === 4 && box[2] > 0 && sizes.length ? Math.min(...sizes) * width / box[2] : null;
        };
        const inline = [...area.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg'))
            .map(s => smallest(s, s.getBoundingClientRect().width));
        const images = [...area.querySelectorAll('img')].filter(i => i.src.startsWith('data:image/svg+xml') && i.width > 0)
            .map(i => smallest(parsed(i.src), i.getBoundingClientRect().width));
        const svgText = [...inline, ...images].filter(px => px !== null);
        const shrunk = [...area.querySelectorAll('img')].filter(i => i.naturalWidth > 0 && i.width > 0
                && i.width < i.naturalWidth - 1).map(i => `${i.alt || 'an image'} drawn ${i.width} px wide of ${i.naturalWidth}`);
        return {cell: index + 1, scroll: area.scrollWidth, client: area.clientWidth, past, outputs, svgText, shrunk};
    }).filter(Boolean);
}"""

# The left sidebar's open panel (the file browser after ?reset): its width, 0 when collapsed.
SIDEBAR_JS = """() => { const p = document.querySelector('#jp-left-stack');
    return p && !p.classList.contains('lm-mod-hidden') ? p.getBoundingClientRect().width : 0; }"""

# Text on the page, in the output areas, that reads badly on what is behind it: contrast under 4.5:1
# (WCAG AA), with the text colour's alpha blended onto the nearest opaque background behind it. Text
# inside SVG pictures and images is left to the picture checks below.
CONTRAST_JS = """() => {
    const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
        const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
        return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
    const lum = ({r, g, b}) => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
    const behind = e => { for (; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
        if (c && c.a > 0.5) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
    const found = [];
    document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((cell, index) => {
        const area = cell.querySelector('.jp-Cell-outputArea');
        if (!area) return;
        const walk = document.createTreeWalker(area, NodeFilter.SHOW_TEXT);
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
            const e = n.parentElement;
            if (!n.textContent.trim() || e.closest('svg, .jp-OutputPrompt') || !e.getClientRects().length) continue;
            const bg = behind(e), c = parse(getComputedStyle(e).color);
            const fg = {r: c.r * c.a + bg.r * (1 - c.a), g: c.g * c.a + bg.g * (1 - c.a), b: c.b * c.a + bg.b * (1 - c.a)};
            const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
            const ratio = (hi + 0.05) / (lo + 0.05);
            if (ratio < 4.5) found.push(`cell ${index + 1}: ${JSON.stringify(n.textContent.trim().slice(0, 60))} `
                                        + `has contrast ${ratio.toFixed(1)}:1 (${getComputedStyle(e).color} on rgb(${bg.r}, ${bg.g}, ${bg.b}))`);
        }
    });
    return found;
}"""

# Pictures that carry their own background (an opaque white card under Graphviz's SVG, an opaque
# PNG), so that their dark lines and text read on a dark page too: the ones that do not.
BACKGROUND_JS = """() => {""" + SVG_OF_IMG_JS + """
    const found = [];
    document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((cell, index) => {
        const area = cell.querySelector('.jp-Cell-outputArea');
        if (!area) return;
        const svgImages = [...area.querySelectorAll('img')].filter(i => i.src.startsWith('data:image/svg+xml'));
        const graphs = [...area.querySelectorAll('svg g.graph'),
                        ...svgImages.map(i => parsed(i.src).querySelector('g.graph')).filter(Boolean)];
        for (const graph of graphs) {
            const card = graph.querySelector(':scope > polygon');
            const fill = card ? (card.getAttribute('fill') || '').toLowerCase() : '';
            if (!['white', '#ffffff', '#fff'].includes(fill)) found.push(`cell ${index + 1}: a DAG has no white card (${fill || 'none'})`);
        }
        for (const img of area.querySelectorAll('img')) {
            if (!img.naturalWidth || !img.src.startsWith('data:image/png')) continue;
            const canvas = document.createElement('canvas');
            canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
            const context = canvas.getContext('2d');
            context.drawImage(img, 0, 0);
            const corners = [[0, 0], [img.naturalWidth - 1, 0], [0, img.naturalHeight - 1]];
            if (corners.some(([x, y]) => context.getImageData(x, y, 1, 1).data[3] < 255))
                found.push(`cell ${index + 1}: ${img.alt || 'a PNG'} has a transparent background`);
        }
    });
    return found;
}"""

MIN_TEXT_PX = 96 / 72 * 10 - 0.05  # 10 pt at 100% zoom, in CSS pixels


def fit_problems(page) -> list[str]:
    """Every output area of the open notebook that is wider than its cell, clips a picture or widget
    past its right edge, or shows picture text under 10 pt."""
    found = []
    for area in page.evaluate(FIT_JS):
        where = f"cell {area['cell']}"
        if area["scroll"] > area["client"]:
            found.append(f"{where}: its output area scrolls ({area['scroll']} px wide in {area['client']} px)")
        found += [f"{where}: an output scrolls: {o}" for o in area["outputs"]]
        if area["past"]:
            found.append(f"{where}: {len(area['past'])} elements reach past the cell's right edge, "
                         f"the first {area['past'][:3]}")
        found += [f"{where}: a picture's text is drawn at {px:.1f} px, under 10 pt" for px in area["svgText"]
                  if px < MIN_TEXT_PX]
        found += [f"{where}: {s}, so its text is shrunk" for s in area["shrunk"]]
    return found


def sidebar_width(page) -> float:
    return page.evaluate(SIDEBAR_JS)


def readability_problems(page) -> list[str]:
    """Text in output areas with too little contrast, and pictures without a background of their own."""
    return page.evaluate(CONTRAST_JS) + page.evaluate(BACKGROUND_JS)
