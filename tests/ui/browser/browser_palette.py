"""One state palette in JupyterLab Light and Dark: every state badge (the jobs panel's, and the
%%e31 widgets' HTML) reads at 4.5:1 or more, a failed job's page says where it stopped in its
state's colour, and the meter chart's labels are readable. Headless Chromium against a real
`e31 lab` with GPUs "0" and "1".

Run by tests/ui/test_browser.py in its own process; alone:
    python -m pytest -p no:cacheprovider -o addopts= tests/ui/browser/browser_palette.py -v
Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import re

from browser_jobs_ui import GATE, gate, gated_notebook, job_row, open_lab, show_panel
from browser_notifications import use_theme
from labserver import api, browser, context, lab, screenshot  # noqa: F401  (pytest fixtures)
from playwright.sync_api import expect
from support import wait_state, write_notebook

from e31_jupyter import widgets
from e31_jupyter.core.states import JobState

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
SEEN_IN_THE_PANEL = {"running", "queued", "succeeded", "failed", "cancelled"}
WCAG_AA = 4.5
PROBE = "e31-palette-probe"

# Each element's text colour and its background, made opaque over its ancestors' backgrounds.
MEASURE = """
(selector) => [...document.querySelectorAll(selector)].map(el => {
  const backgrounds = [];
  for (let at = el; at; at = at.parentElement) {
    backgrounds.push(getComputedStyle(at).backgroundColor);
  }
  return { state: el.dataset.state || '', text: el.textContent.trim(), color: getComputedStyle(el).color, backgrounds };
})
"""


def parse_colour(css: str) -> tuple[float, float, float, float]:
    """rgb(), rgba() or color(srgb ...) as red, green, blue in 0..1 and alpha."""
    numbers = [float(n) for n in re.findall(r"[-\d.]+(?:e-?\d+)?", css)]
    if css.startswith("color(srgb"):
        red, green, blue, *alpha = numbers
        return red, green, blue, alpha[0] if alpha else 1.0
    red, green, blue, *alpha = numbers
    return red / 255, green / 255, blue / 255, alpha[0] if alpha else 1.0


def opaque(colour: str, below: list[str]) -> tuple[float, float, float]:
    """A colour laid over the backgrounds below it (nearest first), as the eye sees it."""
    red, green, blue, alpha = parse_colour(colour)
    if alpha >= 1 or not below:
        return red, green, blue
    under = opaque(below[0], below[1:])
    return tuple(alpha * c + (1 - alpha) * u for c, u in zip((red, green, blue), under))


def luminance(rgb: tuple[float, float, float]) -> float:
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(measured: dict) -> float:
    """The WCAG contrast ratio of an element's text on its background."""
    background = opaque(measured["backgrounds"][0], measured["backgrounds"][1:] + ["rgb(255, 255, 255)"])
    text = opaque(measured["color"], [f"rgb({', '.join(str(round(c * 255)) for c in background)})"])
    light, dark = sorted((luminance(text), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def contrasts(page, selector: str) -> dict[str, float]:
    """Each element's contrast, by its state (or its text)."""
    return {m["state"] or m["text"]: round(contrast(m), 2) for m in page.evaluate(MEASURE, selector)}


def five_states(lab, api) -> dict:
    """A job in each of five states: running (both GPUs, gated), queued behind it, cancelled,
    succeeded and failed (CPU jobs: they run at once)."""
    fine = api.submit(path=str(write_notebook(lab.root / "pal-fine.ipynb", "1 + 1")), name="pal-succeeded", gpus=0)
    broken = api.submit(
        path=str(write_notebook(lab.root / "pal-broken.ipynb", "x = 1", "1 / 0")), name="pal-failed", gpus=0
    )
    printing = write_notebook(lab.root / "pal-printing.ipynb", 'print("epoch 7/12")', GATE, parameters="gate = ''")
    running = api.submit(path=str(printing), name="pal-running", gpus=2, parameters={"gate": gate(lab, "pal")})
    wait_state(api, running["id"], "running")
    waiting = str(gated_notebook(lab, "pal-waits"))
    api.submit(path=waiting, name="pal-queued", gpus=1, parameters={"gate": gate(lab, "pal-queued")})
    cancelled = api.submit(path=waiting, name="pal-cancelled", gpus=1, parameters={"gate": gate(lab, "pal-cancelled")})
    api.cancel(cancelled["id"])
    wait_state(api, fine["id"], "succeeded")
    return wait_state(api, broken["id"], "failed")


def add_probe(page) -> None:
    """A badge of every state as the panel draws it, and as a %%e31 widget's HTML draws it."""
    panel = "".join(
        f'<span class="e31-StateBadge e31-mod-{s.value}" data-state="{s.value}">{s.value}</span>' for s in JobState
    )
    widget = "".join(widgets.badge(s) for s in JobState)
    page.evaluate(
        """([id, panel, widget]) => {
          const probe = document.createElement('div');
          probe.id = id;
          probe.style.cssText = 'position:fixed;bottom:40px;right:10px;z-index:10000;padding:8px;' +
            'display:flex;flex-direction:column;gap:4px;background:var(--jp-layout-color1)';
          probe.innerHTML = `<div class="e31-probe-panel">${panel}</div><div class="e31-probe-widget">${widget}</div>`;
          document.body.appendChild(probe);
        }""",
        [PROBE, panel, widget],
    )


def switch_theme(page, theme: str) -> None:
    """Settings > Theme > `theme`, unless it is the theme already (its menu item is then a
    checked box, not an item to click)."""
    if page.locator("body").get_attribute("data-jp-theme-name") != theme:
        use_theme(page, theme)


def measure_every_badge(page, theme: str) -> dict[str, dict[str, float]]:
    measured = {
        "panel": contrasts(page, "#e31-jobs-panel .e31-StateBadge"),
        "panel palette": contrasts(page, f"#{PROBE} .e31-probe-panel .e31-StateBadge"),
        "widget palette": contrasts(page, f"#{PROBE} .e31-probe-widget .e31-badge"),
    }
    print(f"{theme}: {measured}")  # the report shows the contrast of each
    return measured


def test_every_state_badge_reads_at_4_5_to_1_in_both_themes(lab, api, context):
    failed = five_states(lab, api)
    page = context.new_page()
    open_lab(page, lab, "palette")
    show_panel(page)
    expect(job_row(page, "pal-cancelled")).to_have_attribute("data-state", "cancelled")
    expect(job_row(page, "pal-failed")).to_have_attribute("data-state", "failed")
    add_probe(page)
    shows_its_latest_line(page)
    try:
        for name, theme in THEMES.items():
            switch_theme(page, theme)
            measured = measure_every_badge(page, theme)
            assert SEEN_IN_THE_PANEL <= set(measured["panel"]), measured["panel"]
            assert set(measured["panel palette"]) == set(measured["widget palette"]) == {s.value for s in JobState}
            low = {
                f"{where} {state}": ratio
                for where, ratios in measured.items()
                for state, ratio in ratios.items()
                if ratio < WCAG_AA
            }
            assert not low, f"{theme}: below {WCAG_AA}:1: {low}"
            screenshot(page, f"palette-badges-{name}")
            stopped_where_it_failed(page, failed, theme)
            screenshot(page, f"palette-failed-job-{name}")
            meter_labels_are_readable(page)
            screenshot(page, f"palette-meter-{name}")
            page.locator(".e31-Tab", has_text="Jobs").click()
    finally:
        switch_theme(page, "JupyterLab Light")  # the theme is a setting the other tests share


def shows_its_latest_line(page) -> None:
    """The running job's page shows the last line it printed."""
    job_row(page, "pal-running").locator(".e31-JobRow-open").click()
    expect(page.locator('.e31-Detail-body[data-state="running"] .e31-Detail-lastLine')).to_have_text("epoch 7/12")
    screenshot(page, "palette-running-job-light")


def stopped_where_it_failed(page, failed: dict, theme: str) -> None:
    """The failed job's page says where it stopped, in the failure colour, not "2 of 2 cells"."""
    job_row(page, "pal-failed").locator(".e31-JobRow-open").click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{failed["id"]}"]')
    stopped = detail.locator(".e31-Detail-stopped")
    expect(stopped).to_have_text(re.compile(r"^stopped in cell \d+ of \d+$"))
    expect(detail.locator(".e31-Timeline-end .e31-Timeline-label")).to_have_text("Failed")
    selector = f'.e31-Detail-body[data-job-id="{failed["id"]}"] .e31-Detail-stopped'
    ratio = next(iter(contrasts(page, selector).values()))
    assert ratio >= WCAG_AA, f"{theme}: 'stopped in cell' at {ratio}:1"
    failure_colour = page.evaluate(
        "() => getComputedStyle(document.documentElement).getPropertyValue('--e31-state-failed-fg')"
    )
    colour = page.evaluate("(el) => getComputedStyle(el).color", stopped.element_handle())
    probe = page.evaluate(
        """(value) => { const s = document.createElement('span'); s.style.color = value; document.body.appendChild(s);
                        const c = getComputedStyle(s).color; s.remove(); return c; }""",
        failure_colour,
    )
    assert colour == probe, f"{theme}: 'stopped in cell' is {colour}, the failure colour {probe}"


def meter_labels_are_readable(page) -> None:
    """The meter chart's labels: 11 px or more on screen, dates with their month, a unit."""
    show_panel(page)
    page.locator(".e31-Tab", has_text="Meter").click()
    chart = page.locator(".e31-MeterChart")
    expect(chart.locator(".e31-MeterChart-unit")).to_have_text("GPU-h")
    expect(chart.locator(".e31-MeterChart-axis").last).to_have_text(re.compile(r"^\d{1,2} [A-Z][a-z]{2}$"))
    sizes = page.evaluate(
        """() => [...document.querySelectorAll('.e31-MeterChart text')].map(
              t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""
    )
    assert sizes and min(sizes) >= 11, f"label sizes on screen: {sizes}"
