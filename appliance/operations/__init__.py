"""The operation layer: every operation's typed input, declared once (``definition``, ``fields`` and one
module per family), behind every front door. ``catalogue.operations()`` lists them."""
