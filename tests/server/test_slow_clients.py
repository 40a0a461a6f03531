"""``/api/_live`` keeps answering while 200 slow connections (slowloris-style) are held open on a real
``kumiho-ce serve``, and the server closes every one of them on its own. Not timed: the latency is measured by
benchmarks/slow_clients.py (`make bench-slow-clients`)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.appliance_process import serve
from tests.slow_clients import KINDS, SlowClients, probe_live

SLOW = 200


def test_live_answers_while_200_slow_connections_are_held_and_they_are_all_closed(tmp_path: Path) -> None:
    with serve(tmp_path / "data", KUMIHO_CE_HTTP__HEADER_TIMEOUT_SECONDS="5",
               KUMIHO_CE_HTTP__BODY_TIMEOUT_SECONDS="5") as app:
        host, port = app.base_url.removeprefix("http://").rsplit(":", 1)
        address = (host, int(port))
        slow = SlowClients(address, SLOW, tick=0.5)  # not reopened: the server must close each one itself
        slow.start()
        try:
            assert slow.ready.wait(60) and slow.tally.opened == SLOW
            answered = []
            for _ in range(10):
                answered.append(probe_live(address)[0])
                if slow.open_now < SLOW:
                    break
            # every probe was answered while all 200 were open (on a machine so slow that the 5 s timeouts
            # passed meanwhile, at least the first probe was)
            assert answered and set(answered) == {200}, answered
            give_up = time.monotonic() + 60  # 5 s timeouts; before the limits they stayed for good
            while slow.open_now and time.monotonic() < give_up:
                time.sleep(0.1)
            assert slow.open_now == 0, f"{slow.open_now} slow connections still open"
        finally:
            slow.stop()
        tally = slow.tally
        assert tally.closed_by_server == SLOW
        # the trickling ones are told why (408); the silent ones are just closed
        trickling = sum(1 for n in range(SLOW) if KINDS[n % len(KINDS)] != "silent")
        assert tally.answers["408"] >= trickling * 0.9, tally.answers  # a reset may swallow an answer
        assert min(tally.lifetimes) >= 4.5, "a slow connection was closed before its timeout"
        assert probe_live(address)[0] == 200
