"""``kumiho-ce doctor``: the files a user sets up and can get wrong: the configuration (file and ``KUMIHO_CE_*``
variables), the data directory (owner, permissions, free disk) and the token file (owner, mode, content).
Everything here only reads."""

from __future__ import annotations

import difflib
import os
import pwd
import shutil
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from appliance.config import ENV_PREFIX, Settings, default_config_path, load_settings, resolve_config_path
from appliance.datadir import DataDir
from appliance.doctor_check import Check, Status
from appliance.errors import ConfigError

# Free space on the data directory's filesystem: below MIN_FREE_BYTES writes are about to fail (a checkpoint of
# the graph, an index compaction or a snapshot needs room); below LOW_FREE_BYTES doctor warns.
MIN_FREE_BYTES = 100 * 1024 * 1024
LOW_FREE_BYTES = 1024 * 1024 * 1024
# KUMIHO_CE_* variables that are not settings: the configuration file's path and the log format
NOT_SETTINGS = frozenset({ENV_PREFIX + "CONFIG", ENV_PREFIX + "LOG_FORMAT"})
_RANK: dict[Status, int] = {"ok": 0, "warn": 1, "fail": 2}


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def combined(name: str, findings: list[Check], ok_detail: str) -> Check:
    """One check of several findings: the worst status, every finding's detail and fix (in order)."""
    if not findings:
        return Check.ok(name, ok_detail)
    worst = max(findings, key=lambda c: _RANK[c.status]).status
    fixes = [c.fix for c in findings if c.fix]
    return Check(name, worst, "; ".join(c.detail for c in findings), "; then ".join(fixes) or None)


# -- the configuration ---------------------------------------------------------------------------------------

def check_config(explicit: str | None, data_dir: str | None) -> tuple[Check, Settings | None]:
    """The configuration loads (the file parses, every key is known and valid); the settings when it does."""
    path = resolve_config_path(explicit)
    overrides = {"data_dir": data_dir} if data_dir else {}
    try:
        settings = load_settings(path, **overrides)
    except ConfigError as exc:
        where = f"in {path} or the KUMIHO_CE_* variables" if path else "in the KUMIHO_CE_* variables"
        return Check.fail("config", exc.message, f"correct or remove the setting named above {where} "
                          "(docs/configuration.md lists every key); kumiho-ce serve refuses to start until then"), None
    if path is None:
        return Check.ok("config", f"no configuration file ({default_config_path()} does not exist): the "
                        "built-in defaults and KUMIHO_CE_* variables apply"), settings
    if not path.exists():  # a loader that starts without the file it was pointed at (a first start)
        return Check.warn("config", f"configuration file {path} does not exist: the built-in defaults and "
                          "KUMIHO_CE_* variables apply", f"create {path} with the settings you want to change "
                          "(docs/configuration.md lists every key), or leave it: the defaults serve on "
                          "127.0.0.1"), settings
    return _check_config_file(path), settings


def _check_config_file(path: Path) -> Check:
    """A configuration file that holds a secret (api_token, endpoint_api_key) is readable by its owner only."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        data = {}  # it loaded a moment ago: whatever changed, the next run says
    inference = data.get("inference")
    secrets = [key for key, present in (("api_token", "api_token" in data),
                                        ("inference.endpoint_api_key", isinstance(inference, dict)
                                         and "endpoint_api_key" in inference)) if present]
    mode = stat.S_IMODE(path.stat().st_mode)
    if secrets and mode & 0o077:
        return Check.warn("config", f"{path} holds {' and '.join(secrets)} and is readable by other users "
                          f"(mode {mode:o})", f"chmod 600 {path}")
    return Check.ok("config", f"{path} loads; every key is known")


def check_environment(environ: dict[str, str] | None = None) -> Check:
    """``KUMIHO_CE_*`` variables that name no setting are ignored by the loader: a typo goes unnoticed."""
    environ = dict(os.environ) if environ is None else environ
    known = set(_setting_variables(Settings, ())) | NOT_SETTINGS
    unknown = sorted(name for name in environ if name.upper().startswith(ENV_PREFIX) and name.upper() not in known)
    ours = len([name for name in environ if name.upper().startswith(ENV_PREFIX)])
    if not unknown:
        return Check.ok("variables", f"{ours} KUMIHO_CE_* variable{'' if ours == 1 else 's'}, each a setting")
    said = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), known, n=1)
        said.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return Check.warn("variables", f"ignored, as they name no setting: {', '.join(said)}",
                      "rename or unset them (docs/configuration.md lists every variable; nested keys use __)")


def _setting_variables(model: type[BaseModel], prefix: tuple[str, ...]) -> Iterator[str]:
    """Every variable a setting (or a whole section, as JSON) can be given by."""
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        yield ENV_PREFIX + "__".join(path).upper()
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            yield from _setting_variables(info.annotation, path)


# -- the data directory --------------------------------------------------------------------------------------

def nearest_existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())


def check_data_dir(root: Path) -> Check:
    me = user_name(os.geteuid())
    if not root.exists():
        parent = nearest_existing(root)
        if not os.access(parent, os.W_OK | os.X_OK):
            return Check.fail("data_dir", f"{root} does not exist and cannot be created: {parent} is not writable "
                              f"by {me}", f"create it for the user that runs kumiho-ce: sudo install -d -m 700 -o "
                              f"{me} {root}; or set KUMIHO_CE_DATA_DIR to a directory {me} can write")
        return Check.warn("data_dir", f"{root} does not exist yet", f"none needed: kumiho-ce serve creates it "
                          f"(mode 700) on its first start; to create it now: mkdir -p -m 700 {root}")
    if not root.is_dir():
        return Check.fail("data_dir", f"{root} is not a directory", f"move {root} away, or set KUMIHO_CE_DATA_DIR "
                          "to a directory")
    try:
        info = root.stat()
    except OSError as exc:
        return Check.fail("data_dir", f"{root} cannot be read: {exc.strerror}", f"run kumiho-ce as the owner of "
                          f"{root}, or fix its permissions")
    owner, mode = user_name(info.st_uid), stat.S_IMODE(info.st_mode)
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        return Check.fail("data_dir", f"{root} is not readable and writable by {me} (owner {owner}, mode "
                          f"{mode:o})", f"run kumiho-ce as {owner} (sudo -u {owner} kumiho-ce …), or: chown -R "
                          f"{me} {root}")
    findings = []
    if info.st_uid != os.geteuid():
        findings.append(Check.warn("data_dir", f"{root} is owned by {owner}, not by {me} who runs doctor: files "
                                   f"kumiho-ce writes as {me} would be {me}'s", f"run kumiho-ce as {owner} (sudo -u "
                                   f"{owner} kumiho-ce doctor), or give it to {me}: chown -R {me} {root}"))
    if mode & 0o077:
        findings.append(Check.warn("data_dir", f"{root} is open to other users (mode {mode:o}); memories are "
                                   "private", f"chmod 700 {root}"))
    return combined("data_dir", findings, f"{root} (owner {owner}, mode {mode:o})")


def check_disk(root: Path) -> Check:
    existing = nearest_existing(root)
    free = shutil.disk_usage(existing).free
    text = f"{free / 1024**3:.1f} GiB free on the filesystem of {existing}"
    fix = (f"free space on that filesystem, or move the data directory to a bigger one (stop kumiho-ce, move "
           f"{root}, set KUMIHO_CE_DATA_DIR)")
    if free < MIN_FREE_BYTES:
        return Check.fail("disk", f"{text}: below {MIN_FREE_BYTES >> 20} MiB, writes will fail", fix)
    if free < LOW_FREE_BYTES:
        return Check.warn("disk", f"{text}: below {LOW_FREE_BYTES >> 30} GiB, running low", fix)
    return Check.ok("disk", text)


# -- the token file ------------------------------------------------------------------------------------------

def check_token(settings: Settings, data_dir: DataDir, running: bool) -> Check:
    """The bearer token a request from beyond loopback (or any, with require_token) must present. Without one
    required, nothing reads it: its findings are warnings then."""
    from appliance.admin_api.auth import checked_token, configured_token

    required = settings.token_required
    bad: Status = "fail" if required else "warn"
    if settings.api_token is not None:
        try:
            configured_token(settings)
        except ConfigError as exc:
            return Check("token", bad, exc.message, "set api_token to at least 32 characters (python3 -c \"import "
                         "secrets; print(secrets.token_urlsafe(32))\"), or unset it to use the token file")
        return Check.ok("token", "the api_token setting is used (the token file is not read)")
    path = data_dir.token_path
    new_token = f"rm {path} and restart kumiho-ce: it writes a new token (give it to your clients)"
    try:
        info = path.lstat()
    except FileNotFoundError:
        if not required:
            return Check.ok("token", f"no token file: none is needed on loopback (kumiho-ce writes {path} once "
                            "one is required: host beyond loopback, or require_token)")
        if running:
            return Check.fail("token", f"{path} is gone while the appliance runs: clients that read it (kumiho-ce "
                              "mcp, kumiho-ce memory) have no token", "restart kumiho-ce: it writes a new token")
        return Check.warn("token", f"{path} does not exist yet", "none needed: the next start writes a new token "
                          "(mode 600)")
    except OSError as exc:
        return Check("token", bad, f"{path} cannot be read: {exc.strerror}",
                     "fix the data directory first (see data_dir)")
    if not stat.S_ISREG(info.st_mode):
        return Check("token", bad, f"{path} is not a regular file", new_token)
    me, owner, mode = user_name(os.geteuid()), user_name(info.st_uid), stat.S_IMODE(info.st_mode)
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        return Check("token", bad, f"{path} cannot be read by {me} ({exc}; owner {owner}, mode {mode:o})",
                     f"run kumiho-ce as {owner}, or: chown {me} {path} && chmod 600 {path}")
    findings = []
    if info.st_uid != os.geteuid():
        findings.append(Check.warn("token", f"{path} is owned by {owner}, not by {me}",
                                   f"chown {me} {path} (or run kumiho-ce as {owner})"))
    if mode & 0o077:
        reachable = bool(data_dir.root.stat().st_mode & 0o011)  # others may enter the data directory
        why = "" if reachable and required else ("; nothing reads it on loopback" if reachable
                                                 else "; the data directory keeps them out for now")
        findings.append(Check("token", "fail" if reachable and required else "warn", f"{path} is open to other "
                              f"users (mode {mode:o}){why}", f"chmod 600 {path}"))
    if not token:
        stopped_fix = "none needed: the next start writes a new one" if required else f"rm {path}"
        findings.append(Check("token", "fail" if running and required else "warn", f"{path} is empty"
                              + (": clients that read it have no token" if running and required else ""),
                              "restart kumiho-ce: it writes a new token" if running and required else stopped_fix))
    else:
        try:
            checked_token(token, f"the file {path}", "")
        except ConfigError as exc:
            findings.append(Check("token", bad, exc.message.rstrip("; ") + (
                " (kumiho-ce serve refuses to start with it)" if required else " (unused on loopback)"), new_token))
    return combined("token", findings, f"{path}: {len(token)} characters, owner {owner}, mode {mode:o}"
                    + ("" if required else " (not needed on loopback)"))
