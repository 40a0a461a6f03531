"""The image with a configuration the appliance cannot start with: supervisord gives up after its start retries and
its FATAL listener stops the container, which exits (for its restart policy or its operator to see) instead of
running on with nothing listening. tests/container/running.py says how the image is run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.container.running import data_volume, image_config, start

pytestmark = pytest.mark.long


def test_a_configuration_that_cannot_start_stops_the_container(tmp_path: Path) -> None:
    broken = start(image_config(), "kumiho-ce-test-broken", data_volume(tmp_path), "KUMIHO_CE_PORT=0")
    try:
        begin = time.monotonic()
        broken.process.wait(timeout=180)  # three failed starts, then the listener stops supervisord
        output = broken.output()
        assert "could not be started" in output and "KUMIHO_CE_PORT" in output, output
        print(f'{{"container_broken_config_exit_seconds": {time.monotonic() - begin:.1f}}}')
    finally:
        broken.remove()
