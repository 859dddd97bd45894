"""Screenshot a page of a running Headroom server, signed in as a demo user (Playwright + Debian chromium).

.venv/bin/python bin/screenshot.py --base-url http://127.0.0.1:8101 --user demo-operator --out docs/screenshot.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8101")
    ap.add_argument("--user", default="demo-operator")
    ap.add_argument("--password", default="demo")
    ap.add_argument("--path", default="/")
    ap.add_argument("--out", default="docs/screenshot.png")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--full-page", action="store_true")
    args = ap.parse_args()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.goto(f"{args.base_url}/login/")
        page.fill("input[name=username]", args.user)
        page.fill("input[name=password]", args.password)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        page.goto(f"{args.base_url}{args.path}")
        page.wait_for_load_state("networkidle")
        # Charts draw after DOMContentLoaded; wait for plotly's SVG when the page has one.
        if page.locator("script.plotly-fig").count():
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15000)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=args.out, full_page=args.full_page)
        browser.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
