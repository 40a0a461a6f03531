"""The graph port's Kùzu adapter. Import ``GraphStore`` from here; nothing else imports kuzu."""

from appliance.graph.links import NewEdge
from appliance.graph.memories import CreatedMemory, NewMemory
from appliance.graph.outbox import IndexDoc
from appliance.graph.revisions import BulkResult, NewArtifact, NewRevision
from appliance.graph.store import GraphStore

__all__ = ["BulkResult", "CreatedMemory", "GraphStore", "IndexDoc", "NewArtifact", "NewEdge", "NewMemory",
           "NewRevision"]
