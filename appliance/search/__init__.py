"""The search port's LanceDB adapter: the index, its sync with the graph, and the search service."""
