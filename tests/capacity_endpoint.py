"""A PromQL endpoint on loopback that answers what a test tells it to: the hostile answers the report
must survive (a trickled body, malformed JSON, NaN, labels made to break a table or a spreadsheet).
Real HTTP on a real socket; only the answers are the test's."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (path, form fields) -> JSON answer, or bytes sent as they are
Answerer = Callable[[str, dict[str, str]], Any]


def vector(*series: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [0, v]} for m, v in series]},
    }


EMPTY_MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}


def one_pool(instance: str, pool: str, written: str = "3.6e9") -> Answerer:
    """One instance with one pool that wrote `written` bytes over each period: 1 MB/s over the hour
    grid's periods when `written` is 3.6e9 per hour of period."""

    def answer(path: str, form: dict[str, str]) -> Any:
        query = form.get("query", "")
        if path.endswith("query_range"):
            return EMPTY_MATRIX
        if query.startswith("count by (instance, pool)"):
            return vector(({"instance": instance, "pool": pool}, "1"))
        if "label_replace" in query:
            return vector(
                ({"q": "written", "pool": pool}, written),
                ({"q": "rated", "pool": pool}, "7e15"),
                ({"q": "planned", "pool": pool}, "157788000"),
                ({"q": "msm_max"}, str(256 * 2**30)),
                ({"q": "target_max"}, str(250 * 2**30)),
            )
        return vector()

    return answer


class Endpoint:
    def __init__(self, answer: Answerer, trickle_seconds: float = 0.0) -> None:
        self.answer = answer
        self.trickle_seconds = trickle_seconds  # > 0: send the body a byte at a time, this far apart
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.stop = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                endpoint.requests.append((self.path, form))
                result = endpoint.answer(self.path, form)
                body = result if isinstance(result, bytes) else json.dumps(result).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if endpoint.trickle_seconds <= 0:
                    self.wfile.write(body)
                    return
                for byte in body:
                    if endpoint.stop.wait(endpoint.trickle_seconds):
                        return
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        time.sleep(0)  # let trickling handlers see the stop
