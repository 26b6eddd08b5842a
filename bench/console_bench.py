"""The console at fleet scale in headless Chromium (Debian's chromium + chromium-driver): one
worker with 10,000 topics and 500 brokers (tests/support/big_fleet.py), then

* first render: from navigation to the first full draw of every panel (the page's own
  ``performance.now()``, layout included), from a worker started a second before (its topic
  summary reads every topic), after a change of one group's 80 topics (a write-perm wipe or
  add: those topics are read again), and with nothing changed since the last answer;
* filtering the topic table (typed queries: a topic prefix, a group, an address, a cluster,
  clearing), and sorting it by a column: the handler and the layout after it;
* the answer the page reads the topics from (GET /v1/topics/summary) by HTTP, in the same three
  cases.

Writes results/console.json and the screenshot results/console.png (docs/console.md shows it).
Targets (issue 25): first render under 1 s, filtering under 100 ms.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchlib import RESULTS_DIR, new_results, start_worker, summary, write_results

from nsfleet.redis_server import RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support import big_fleet  # from the repository root, just added

QUERIES = ["Orders-0421", "broker-007", "10.1.0.7:10911", "Cluster-3", "orders", ""]
TIMED_INPUT = """
const [id, value] = arguments;
const el = document.getElementById(id);
const started = performance.now();
el.value = value;
el.dispatchEvent(new Event("input"));
void document.body.offsetHeight;
return performance.now() - started;
"""
TIMED_CLICK = """
const started = performance.now();
document.querySelector(arguments[0]).click();
void document.body.offsetHeight;
return performance.now() - started;
"""


def browser(width: int, height: int):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        sys.exit("needs Debian's chromium and chromium-driver (apt-get install)")
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(driver))


def change_one_group(url: str, n: int) -> None:
    """Wipe, then add back, the write perm of one group's topics (80 of them): they are read
    again for the next summary."""
    action = "wipe-write-perm" if n % 2 == 0 else "add-write-perm"
    req = urllib.request.Request(f"{url}/v1/brokers/broker-100/{action}", data=b"",
                                 method="POST")
    urllib.request.urlopen(req, timeout=10).read()


BREAKDOWN = """
const end = (part) => performance.getEntriesByType("resource")
  .filter((e) => e.name.includes(part)).map((e) => e.responseEnd)[0] ?? null;
return {rendered: window.nsfleetConsole.firstRenderMs,
        scriptLoaded: end("console.js"), summaryRead: end("/v1/topics/summary"),
        clusterInfoRead: end("/v1/cluster-info")};
"""


def first_render(b, url: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Milliseconds from navigation: the page's script loaded, the topic summary and the
    cluster info read, the first full render."""
    b.get(f"{url}/ui")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        times = b.execute_script(BREAKDOWN)
        if times["rendered"] is not None:
            return {k: float(v) for k, v in times.items() if v is not None}
        time.sleep(0.02)
    raise TimeoutError("the console never rendered")


def summary_fetch(url: str) -> float:
    req = urllib.request.Request(f"{url}/v1/topics/summary", headers={"Accept-Encoding": "gzip"})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--brokers", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5, help="page loads and queries per case")
    args = parser.parse_args()
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp), appendonly=False)
        server.start()
        proc, http_port, _ = start_worker(server.url, Path(tmp) / "w.log",
                                          NSFLEET_NAMESPACE="console-bench")
        url = f"http://127.0.0.1:{http_port}"
        b = None
        try:
            fleet = big_fleet.layout(args.topics, args.brokers)
            started = time.perf_counter()
            big_fleet.register(url, fleet)
            results["register_fleet_s"] = round(time.perf_counter() - started, 2)
            http: dict[str, list[float]] = {"new_worker": [], "after_change": [],
                                            "unchanged": []}
            http["new_worker"].append(summary_fetch(url))  # its first: every topic read
            for n in range(args.runs):
                change_one_group(url, n)
                http["after_change"].append(summary_fetch(url))
                http["unchanged"].append(summary_fetch(url))
            b = browser(1600, 1000)
            first_render(b, url)  # the browser's own first start, not counted
            runs: dict[str, list[dict[str, float]]] = {"new_worker": [], "after_change": [],
                                                       "unchanged": []}
            for n in range(args.runs):
                fresh, fresh_port, _ = start_worker(server.url, Path(tmp) / "fresh.log",
                                                    NSFLEET_NAMESPACE="console-bench")
                try:
                    fresh_url = f"http://127.0.0.1:{fresh_port}"
                    time.sleep(1)  # its start-up work done: the first page it serves
                    if n % 2:
                        http["new_worker"].append(summary_fetch(fresh_url))
                    else:
                        runs["new_worker"].append(first_render(b, fresh_url))
                finally:
                    fresh.terminate()
                    fresh.wait(10)
                change_one_group(url, n)
                runs["after_change"].append(first_render(b, url))
                runs["unchanged"].append(first_render(b, url))
            results["summary_http_ms"] = {case: summary(s, 1) for case, s in http.items()}
            results["first_render_ms"] = {case: summary([r["rendered"] for r in samples], 1)
                                          for case, samples in runs.items()}
            results["first_render_parts_p50_ms"] = {
                case: {part: round(statistics.median(r[part] for r in samples), 1)
                       for part in samples[0]}
                for case, samples in runs.items()}
            filters: dict[str, list[float]] = {q or "(cleared)": [] for q in QUERIES}
            for _ in range(args.runs):
                for q in QUERIES:
                    filters[q or "(cleared)"].append(
                        b.execute_script(TIMED_INPUT, "topic-search", q))
            results["filter_ms"] = {q: summary(s, 1) for q, s in filters.items()}
            sorts = [b.execute_script(TIMED_CLICK, f"#topics th[data-key={key}]")
                     for _ in range(args.runs) for key in ("groups", "perms", "topic")]
            results["sort_ms"] = summary(sorts, 1)
            results["targets"] = {"first_render_ms": 1000, "filter_ms": 100}
            # The screenshot: a filtered topic table, a topic's view, the changes.
            b.execute_script(TIMED_INPUT, "topic-search", "Orders-004")
            b.find_element("link text", "Orders-00421").click()
            b.execute_script("window.scrollTo(0, 0)")
            time.sleep(0.3)
            b.save_screenshot(str(RESULTS_DIR / "console.png"))
            results["screenshot"] = "results/console.png"
        finally:
            if b is not None:
                b.quit()
            proc.terminate()
            proc.wait(10)
            server.stop()
    write_results("console", results)


if __name__ == "__main__":
    main()
