"""The report page in a real browser (headless Chromium, Debian package `chromium`, installed by
`make install`): no console errors, no network request, every image loaded with a non-zero size."""

import pytest

from browser import find_chromium, open_page

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="chromium is not installed (make install runs apt-get install chromium where apt and root are available)")


def test_report_page_in_headless_chromium(written_report, tmp_path):
    report, files = written_report
    page = open_page(files.html)
    assert page.console_errors == []
    assert page.title == "fixture - depthwidth report"
    # only the page itself and its inline data: URIs; nothing from a network
    assert all(u.startswith(("file://", "data:")) for u in page.requests), page.requests
    assert len(page.images) == len(files.figures) >= 9
    for img in page.images:
        assert img["complete"] and img["width"] > 0 and img["height"] > 0, img
        assert img["shown_width"] > 100 and img["shown_height"] > 50, img
    assert page.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(page.screenshot) > 50_000
    (tmp_path / "report.png").write_bytes(page.screenshot)


def test_the_browser_check_sees_broken_images_and_console_errors(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><title>bad</title><link rel="icon" href="data:,"></head><body>'
                   '<img src="data:image/png;base64,AAAA"><script>console.error("boom")</script></body></html>')
    page = open_page(bad)
    assert any("boom" in e for e in page.console_errors)
    assert page.images[0]["width"] == 0
