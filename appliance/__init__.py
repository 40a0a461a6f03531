"""kumiho-ce: an offline, self-hosted Kumiho Community Edition appliance."""

import os

__version__ = "0.1.0"

# ONNX Runtime (the embedding model's runtime) collects usage telemetry on Linux too: importing it writes a
# device id and an event store under ~/.cache/Microsoft/DeveloperTools, and its uploader threads look up and
# contact a Microsoft collector. The appliance sends nothing anywhere, so this is set before any module can
# import onnxruntime (it reads the variable when it loads).
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
