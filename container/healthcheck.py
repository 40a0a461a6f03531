"""The image's HEALTHCHECK: the appliance answers ``/api/_live`` where its settings say it listens (the
image's environment, then /etc/kumiho-ce/config.toml when one is mounted). Exit status 0 when it does, 1 when
it does not, with the reason on stderr."""

from __future__ import annotations

import sys
import urllib.request

from appliance.config import load_settings, resolve_config_path
from appliance.errors import KumihoError

TIMEOUT_SECONDS = 4  # under the HEALTHCHECK's --timeout


def live_url() -> str:
    settings = load_settings(resolve_config_path())
    host = settings.host
    if host in ("0.0.0.0", "::", ""):  # every address: ask on loopback
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}/api/_live"


def main() -> int:
    try:
        url = live_url()
    except KumihoError as exc:
        print(f"kumiho-ce healthcheck: {exc}", file=sys.stderr)
        return 1
    try:
        # no proxy: a container started with HTTP_PROXY set must still reach its own loopback
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=TIMEOUT_SECONDS) as answer:
            status = answer.status
    except OSError as exc:  # refused, timed out, or an HTTP error status
        print(f"kumiho-ce healthcheck: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
