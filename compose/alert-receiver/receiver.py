"""Stand-in for a pager and a ticket system in the compose bundle.

alerts/alertmanager.yml sends its `pager` and `ticket` receivers to http://alert-receiver:5001/alerts/...
(placeholders you replace with real integrations). In the bundle this service answers there and prints one
line per alert of every notification, so `docker compose logs -f alert-receiver` shows what would have
paged someone or opened a ticket. Standard library only; runs in the bundle's Python base image.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 1 << 20


def describe(receiver: str, payload: dict[str, Any]) -> list[str]:
    """One line per alert of an Alertmanager webhook notification (version 4 payload)."""
    lines = []
    for alert in payload.get("alerts", []):
        labels = alert.get("labels", {})
        parts = [
            f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}",
            receiver.upper(),
            str(alert.get("status", "?")).upper(),
            labels.get("alertname", "?"),
            f"severity={labels.get('severity', '?')}",
            f"instance={labels.get('instance', '?')}",
        ]
        parts += [f"{key}={labels[key]}" for key in ("node", "pool", "source", "collector") if key in labels]
        parts.append(":: " + alert.get("annotations", {}).get("summary", ""))
        lines.append(" ".join(parts))
    return lines


class Handler(BaseHTTPRequestHandler):
    server_version = "alert-receiver"

    def do_GET(self) -> None:
        self._answer(200 if self.path == "/healthz" else 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not self.path.startswith("/alerts/") or not 0 < length <= MAX_BODY:
            self._answer(400)
            return
        try:
            payload = json.loads(self.rfile.read(length))
        except ValueError:
            self._answer(400)
            return
        for line in describe(self.path.removeprefix("/alerts/"), payload):
            print(line, flush=True)
        self._answer(200)

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the alert lines are the output."""


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 5001
    print(f"alert-receiver listening on :{port}", flush=True)
    ThreadingHTTPServer(("", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
