"""``kumiho-ce doctor``: the machine: whether the configured port is free (or held by this very appliance), and
whether the CPU has the instructions the installed llama.cpp build uses."""

from __future__ import annotations

import errno
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.doctor_check import Check, Status

PORT_FIX = ("stop that program, or give kumiho-ce another port: port = <free port> in the configuration (or "
            "KUMIHO_CE_PORT)")


# -- ports ---------------------------------------------------------------------------------------------------

def probe_bind(host: str, port: int) -> None:
    """Bind (never listen) as ``kumiho-ce serve`` does (appliance/server/front.py), and let go at once: raises
    the OSError serve would meet. Nobody connecting to the port notices."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))


def listener_of(port: int) -> int | None:
    """The pid of the process listening on TCP ``port`` (any address), when this user may see its sockets
    (its own processes; every process for root); None otherwise."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st … inode
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue  # another user's process, or gone
    return None


def command_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(a.decode(errors="replace") for a in argv if a)[:80] or "?"


def check_port(settings: Settings, data_dir: DataDir, holder: int | None) -> Check:
    """The HTTP/MCP/gRPC port: free, or held by the appliance that owns this data directory (not a failure)."""
    host, port = settings.host, settings.port
    where = f"{host}:{port}"
    try:
        probe_bind(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return _taken(where, port, data_dir, holder)
        if exc.errno == errno.EADDRNOTAVAIL:
            return Check.fail("port", f"{host} is not an address of this machine, so kumiho-ce serve cannot "
                              "listen on it", "set host to one of its addresses (127.0.0.1 by default; 0.0.0.0 for "
                              "every interface, with a token)")
        if exc.errno == errno.EACCES:
            return Check.fail("port", f"{where}: listening on a port below 1024 needs privileges kumiho-ce does "
                              "not have", "set port to 1024 or above (9190 by default; KUMIHO_CE_PORT)")
        reason = exc.strerror or str(exc)  # socket.gaierror: a host name that does not resolve
        return Check.fail("port", f"kumiho-ce serve cannot listen on {where}: {reason}",
                          "set host to an address of this machine (KUMIHO_CE_HOST) and port to a free port")
    runtime = data_dir.live_runtime() if holder is not None else None
    if runtime is not None and runtime.get("port") != port:
        return Check.ok("port", f"{where} is free; the running appliance listens on port {runtime.get('port')} "
                        "(started with --port?)")
    return Check.ok("port", f"{where} is free")


def _taken(where: str, port: int, data_dir: DataDir, holder: int | None) -> Check:
    listener = listener_of(port)
    runtime = data_dir.live_runtime() if holder is not None else None
    if holder is not None and (listener == holder or (runtime is not None and runtime.get("port") == port)):
        return Check.ok("port", f"{where}: this data directory's running appliance (pid {holder}) listens there")
    who = f" by pid {listener} ({command_of(listener)})" if listener else " by another program"
    if holder is not None:  # this data directory's appliance runs elsewhere (--port): only its next start is at stake
        return Check.warn("port", f"{where} is taken{who}: the next kumiho-ce serve without --port cannot listen "
                          "there", PORT_FIX)
    return Check.fail("port", f"{where} is taken{who}: kumiho-ce serve cannot listen there", PORT_FIX)


def check_redis_port(settings: Settings) -> Check | None:
    """The working-memory listener's port (the appliance stopped): taken, the listener stays off."""
    port = settings.kumiho.redis_port
    if not port:
        return None
    try:
        probe_bind("127.0.0.1", port)
    except OSError as exc:
        listener = listener_of(port)
        who = f"pid {listener} ({command_of(listener)})" if listener else "another program"
        said = f"taken by {who}" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        return Check.warn("redis", f"127.0.0.1:{port} is {said}: the working-memory listener for Kumiho's stock "
                          "sidecar will be off (everything else works)", "set [kumiho] redis_port to a free port "
                          "(KUMIHO_CE_KUMIHO__REDIS_PORT) and the sidecar's KUMIHO_UPSTASH_REDIS_URL to match, or 0 "
                          "to turn the listener off")
    return Check.ok("redis", f"127.0.0.1:{port} is free for the working-memory listener")


# -- CPU -----------------------------------------------------------------------------------------------------

# llama.cpp's name of an instruction set (llama_print_system_info) → the flag /proc/cpuinfo shows for it
LLAMA_FEATURES = {"SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c", "FMA": "fma",
                  "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
                  "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8"}
PORTABLE = ("avx2", "fma", "f16c")  # what the portable build (container image, air-gapped bundle) uses
SYSTEM_INFO = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
REBUILD_FIX = ("rebuild llama-cpp-python on this machine: make install (it builds for this CPU), or install the "
               "portable wheel (make -s llama-portable prints its directory; it needs AVX2, FMA and F16C)")


def cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The instruction-set flags of the first CPU (x86 only: other CPUs list ``Features``); None when unknown."""
    try:
        text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else None


def built_features(system_info: str) -> list[str]:
    """The x86 instruction sets a llama.cpp build uses, from its system info ("… AVX2 = 1 | F16C = 1 | …")."""
    return [name for name, value in re.findall(r"(\w+) = (\d+)", system_info)
            if value == "1" and name in LLAMA_FEATURES]


def lacking_features(system_info: str, flags: set[str]) -> list[str]:
    """Those of the build's instruction sets a CPU with ``flags`` (/proc/cpuinfo) does not have."""
    return [name for name in built_features(system_info) if LLAMA_FEATURES[name] not in flags]


def check_cpu(settings: Settings) -> Check:
    flags = cpu_flags()
    if flags is None:
        return Check.ok("cpu", "not an x86-64 CPU (or no /proc/cpuinfo): instruction sets not checked")
    uses_llama = settings.inference.chat_model in ("default", "gguf")
    bad: Status = "fail" if uses_llama else "warn"
    if importlib.util.find_spec("llama_cpp") is None:
        lacking = [f for f in PORTABLE if f not in flags]
        if lacking:
            return Check.warn("cpu", f"this CPU lacks {', '.join(lacking)}, which the portable llama-cpp-python "
                              "build (container image, air-gapped bundle) needs", "build llama-cpp-python on this "
                              "machine without them: CMAKE_ARGS=\"-DGGML_NATIVE=ON\" pip install --no-binary "
                              "llama-cpp-python llama-cpp-python==0.3.36")
        return Check.ok("cpu", "has AVX2, FMA and F16C (the portable llama.cpp build's); llama-cpp-python is not "
                        "installed")
    try:  # in a child: a build with instructions this CPU lacks dies of SIGILL, which doctor must survive
        done = subprocess.run([sys.executable, "-c", SYSTEM_INFO], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return Check.warn("cpu", "llama.cpp did not load within 120 s; its instruction sets are not checked",
                          "run kumiho-ce doctor again when the machine is less busy")
    if done.returncode < 0:
        died = signal.Signals(-done.returncode).name
        return Check("cpu", bad, f"loading llama.cpp killed the process ({died}): its build uses instructions this "
                     "CPU lacks, so the chat model would stop the appliance", REBUILD_FIX)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("cpu", bad, f"llama.cpp does not load ({last[:200]})", "make install")
    lacking = lacking_features(done.stdout, flags)
    uses = ", ".join(built_features(done.stdout)) or "no x86 extension"
    if lacking:
        return Check("cpu", bad, f"llama.cpp is built for {uses}; this CPU lacks {', '.join(lacking)}, so the chat "
                     "model would stop the appliance (illegal instruction)", REBUILD_FIX)
    return Check.ok("cpu", f"llama.cpp is built for {uses}: this CPU has each")
