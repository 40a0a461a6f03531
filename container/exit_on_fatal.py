"""A supervisord event listener: when the appliance cannot be started (FATAL after its start retries), stop
supervisord, so that the container exits and its restart policy or its operator sees the failure, instead of a
container that runs on with nothing listening in it.

The protocol (supervisord's "event listener" notification protocol): say READY, read one header line, read the
payload its ``len`` gives, answer ``RESULT 2\\nOK``. Only PROCESS_STATE_FATAL is subscribed to.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    while True:
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        header = dict(token.split(":", 1) for token in sys.stdin.readline().split())
        payload = sys.stdin.read(int(header.get("len", "0")))
        fields = dict(token.split(":", 1) for token in payload.split() if ":" in token)
        print(f"kumiho-ce: {fields.get('processname', 'the appliance')} could not be started (see the lines above); "
              "stopping the container", file=sys.stderr, flush=True)
        sys.stdout.write("RESULT 2\nOK")
        sys.stdout.flush()
        os.kill(os.getppid(), signal.SIGTERM)  # the listener's parent is supervisord


if __name__ == "__main__":
    main()
