"""Print the configuration reference: ``python -m appliance.config_reference > docs/configuration.md``."""

from appliance.config import reference_markdown

print(reference_markdown(), end="")
