"""The portal's browser tests share one page size."""

import pytest


@pytest.fixture
def page(browser):
    return browser.new_page(viewport={"width": 1400, "height": 900})
