from appliance.server.allocator import limit_malloc_arenas

limit_malloc_arenas()  # before any thread starts (allocator.py says why)

from appliance.cli import main  # noqa: E402

raise SystemExit(main())
