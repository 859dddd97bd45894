"""Screenshot pages of a running Headroom server, signed in as demo users (Playwright + Debian chromium).

One page:
    .venv/bin/python bin/screenshot.py --base-url http://127.0.0.1:8101 --user demo-operator --path / --out docs/x.png
The README's screenshots (home, planning, usage, launch review) at 1280 × 800, into docs/:
    .venv/bin/python bin/screenshot.py --base-url http://127.0.0.1:8101 --readme
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# (file in docs/, who, path): the launch review is the first request in the approver's queue.
README_SHOTS = [
    ("home.png", "demo-operator", "/"),
    ("planning.png", "demo-operator", "/planning/"),
    ("usage.png", "demo-viewer", "/"),
    ("launch-review.png", "demo-approver", "queue:first"),
]


def _sign_in(browser: Any, base: str, user: str, password: str, width: int, height: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{base}/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    return page


def _shoot(page: Any, base: str, path: str, out: Path, full_page: bool) -> bool:
    if path == "queue:first":
        page.goto(f"{base}/launch/queue/")
        link = page.locator("#queue-rows tbody a").first
        if not link.count():
            print(f"skipped {out}: no submitted launch request in the queue")
            return False
        path = link.get_attribute("href")
    page.goto(f"{base}{path}")
    page.wait_for_load_state("networkidle")
    # Charts draw after DOMContentLoaded; wait for plotly's SVG when the page has one (attached, not
    # visible: the first chart may sit in a closed <details>).
    if page.locator("div.chart[data-figure]").count():
        page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=15000)
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out), full_page=full_page)
    print(f"wrote {out}")
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8101")
    ap.add_argument("--user", default="demo-operator")
    ap.add_argument("--password", default="demo")
    ap.add_argument("--path", default="/")
    ap.add_argument("--out", default="docs/screenshot.png")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=800)
    ap.add_argument("--full-page", action="store_true")
    ap.add_argument("--readme", action="store_true", help="the README's four screenshots into docs/")
    args = ap.parse_args()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        if args.readme:
            for name, user, path in README_SHOTS:
                page = _sign_in(browser, args.base_url, user, args.password, args.width, args.height)
                _shoot(page, args.base_url, path, Path("docs") / name, args.full_page)
                page.close()
        else:
            page = _sign_in(browser, args.base_url, args.user, args.password, args.width, args.height)
            _shoot(page, args.base_url, args.path, Path(args.out), args.full_page)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
