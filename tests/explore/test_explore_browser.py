"""The explorer page in a real browser: headless Chromium (Debian's `chromium`) driven by Selenium through the
system's chromedriver. Load the page, set a budget and a limit, read the family table against `plan --json`,
hover a point and read its detail against `calc --json`, pin two shapes side by side, see the study's points,
type a bad value and see the command line's message beside the field, reopen the shared address; no console
error. A full-page screenshot is written to the path the test prints (DEPTHWIDTH_EXPLORE_SCREENSHOT, else
the test's temporary folder)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import urllib.parse
from pathlib import Path

import pytest

from explore_helpers import argv_of_command

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver are not installed (make install runs apt-get install chromium where apt "
           "and root are available)")


@pytest.fixture
def driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install '.[test]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield d
    d.quit()


def _wait(driver, condition, what: str, timeout: float = 30):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), message=what)


def _ready_for(driver, *pairs: str):
    """Wait until the page shows the answer to a query holding every `key=value` of `pairs`."""
    def ready(d):
        status = d.find_element("id", "status")
        query = status.get_attribute("data-query") or ""
        return status.get_attribute("data-state") == "ready" and all(p in query.split("&") for p in pairs)

    _wait(driver, ready, f"the page to show {pairs}")


def _point(driver, index: int):
    """The chart's family point `index` (found again after each redraw)."""
    return driver.find_elements("css selector", "#chart .family-point")[index]


def _type(driver, name: str, text: str) -> None:
    box = driver.find_element("id", f"f-{name}")
    box.clear()
    box.send_keys(text)


def _table(driver) -> list[dict[str, tuple[str, str]]]:
    rows = []
    for tr in driver.find_elements("css selector", "#family tbody tr"):
        cells = {td.get_attribute("data-key"): (td.text, td.get_attribute("data-value"))
                 for td in tr.find_elements("tag name", "td")}
        rows.append(cells)
    return rows


def _screenshot(driver) -> bytes:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, height + 40)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    return base64.b64decode(shot["data"])


def test_the_explorer_page_in_headless_chromium(driver, base_url, cli_json, cli_error, tmp_path, capsys):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select

    driver.get(base_url + "?params=124M&count=7&bootstrap=0&splits=2")
    _ready_for(driver, "params=124M")
    assert driver.title == "depthwidth explore"

    # a budget and a limit, typed as a user types them
    _type(driver, "params", "350M")
    _type(driver, "max_decode_ms", "2")
    _ready_for(driver, "params=350M", "max_decode_ms=2")
    plan = cli_json(["plan", "--params", "350M", "--count", "7", "--json"])
    rows = _table(driver)
    assert len(rows) == len(plan["members"]) == 7
    for row, member in zip(rows, plan["members"]):
        assert row["derived.label"][0].removesuffix(" *") == member["derived"]["label"]
        assert row["shape.n_layers"][0] == str(member["shape"]["n_layers"])
        assert row["shape.d_model"][0] == f"{member['shape']['d_model']:,}"
        assert row["params.total"][0] == f"{member['params']['total']:,}"  # exact counts
        assert row["params.non_embedding"][0] == f"{member['params']['non_embedding']:,}"
        assert float(row["latency.decode_ms"][1]) == member["latency"]["decode_ms"]
        assert float(row["flops.train_per_token"][1]) == member["flops"]["train_per_token"]
        meets = member["latency"]["decode_ms"] <= 2
        assert row["limits"] == (("meets", "true") if meets else (row["limits"][0], "false"))
        assert meets or row["limits"][0].startswith("decode ") and row["limits"][0].endswith("> 2 ms")
    assert {r["limits"][1] for r in rows} == {"true", "false"}
    assert driver.find_element("id", "command").text == "depthwidth plan --params 350M --count 7 --json"
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(driver.current_url).query))
    assert query["params"] == "350M" and query["max_decode_ms"] == "2"

    # the study's points on the same axes, its recommendation and prescription (the page is ready once they are)
    assert driver.find_element("id", "study-0").get_attribute("data-state") == "ready"
    assert len(driver.find_elements("css selector", "#chart .study-point")) == 8
    assert "Recommended: " in driver.find_element("id", "study-0").text
    assert len(driver.find_elements("css selector", "#chart .law-point")) > 3

    # hover a point: its detail is `calc --json` of the command line shown with it
    points = driver.find_elements("css selector", "#chart .family-point")
    assert [p.get_attribute("data-meets") for p in points] == [r["limits"][1].replace("true", "yes").replace(
        "false", "no") for r in rows]
    ActionChains(driver).move_to_element(points[2]).perform()
    label = plan["members"][2]["derived"]["label"]
    _wait(driver, lambda d: d.find_element("id", "detail-body").get_attribute("data-label") == label, "the detail")
    detail = json.loads(driver.find_element("id", "detail-json").get_attribute("textContent"))
    command = driver.find_element("id", "detail-command").text
    assert detail == cli_json(argv_of_command(command))
    assert detail["shape"] == plan["members"][2]["shape"] and detail["params"] == plan["members"][2]["params"]

    # two shapes pinned side by side
    _point(driver, 2).click()
    _wait(driver, lambda d: d.find_element("id", "pins-body").text.endswith("click another shape to compare."),
          "one pin")
    _ready_for(driver, "params=350M", "max_decode_ms=2")
    _point(driver, 5).click()
    other = plan["members"][5]["derived"]["label"]
    _wait(driver, lambda d: d.find_element("id", "pins-body").get_attribute("data-pair") == f"{label},{other}", "pins")
    pair_text = driver.find_element("id", "pins-body").text
    assert pair_text.startswith(f"{label} {other} 2nd / 1st")
    assert f"{plan['members'][5]['params']['total']:,}" in pair_text
    shared = driver.current_url
    assert "pins=" + urllib.parse.quote(f"{label},{other}") in shared or f"pins={label}%2C{other}" in shared

    # the loss axis: the study's seeds and the law's candidates
    Select(driver.find_element("id", "y-axis")).select_by_value("loss")
    assert len(driver.find_elements("css selector", "#chart .study-point .seed")) == 16
    assert "y=loss" in driver.current_url
    Select(driver.find_element("id", "y-axis")).select_by_value("decode_ms")

    # a bad value: the command line's own message next to the field
    _type(driver, "params", "12Q")
    _wait(driver, lambda d: d.find_element("id", "status").get_attribute("data-state") == "invalid", "the message")
    assert driver.find_element("id", "err-params").text == cli_error(["plan", "--params", "12Q"])
    assert "invalid" in driver.find_element("css selector", "[data-field=params]").get_attribute("class")

    # the shared address reopens the same view
    driver.get(shared)
    _ready_for(driver, "params=350M", "max_decode_ms=2")
    assert driver.find_element("id", "f-params").get_attribute("value") == "350M"
    _wait(driver, lambda d: d.find_element("id", "pins-body").get_attribute("data-pair") == f"{label},{other}",
          "the pins again")
    ActionChains(driver).move_to_element(_point(driver, 2)).perform()
    _wait(driver, lambda d: d.find_element("id", "detail-body").get_attribute("data-label") == label, "the detail")

    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    path = Path(os.environ.get("DEPTHWIDTH_EXPLORE_SCREENSHOT") or tmp_path / "explore.png")
    path.write_bytes(_screenshot(driver))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 50_000
    with capsys.disabled():
        print(f"\nexplore screenshot: {path}")
