#!/bin/sh
# Install kumiho-ce from this bundle on a machine without a network. `./install.sh --help` says how.
# Nothing is installed until every file of the bundle matches SHA256SUMS; pip reads only this bundle's
# wheels/ (no index, and no pip configuration of the machine: PIP_CONFIG_FILE=/dev/null and --isolated).
set -eu

usage() {
    cat <<EOF
Usage: ./install.sh [--prefix DIR] [--python PYTHON] [--models-dir DIR] [--no-models]

Installs kumiho-ce from this bundle without a network: checks every file against SHA256SUMS, creates a
virtual environment in DIR/.venv, installs the wheels of wheels/ and nothing else, and joins the chat model
into the installation's models directory, where every data directory and the service find it.

  --prefix DIR      where to install (default /opt/kumiho-ce, where the systemd unit looks);
                    the environment is DIR/.venv, the command DIR/.venv/bin/kumiho-ce
  --python PYTHON   the Python interpreter (default: python3.X on PATH, the version the bundle was built for)
  --models-dir DIR  put the chat model in DIR instead of DIR/.venv/share/kumiho-ce/models; the appliance then
                    needs models_dir = "DIR" in its configuration (or KUMIHO_CE_MODELS_DIR=DIR)
  --no-models       install the software only
EOF
}

fail() {
    echo "install.sh: $*" >&2
    exit 1
}

PREFIX=/opt/kumiho-ce
PYTHON=
MODELS_DIR=
WITH_MODELS=yes
while [ $# -gt 0 ]; do
    case $1 in
        --prefix | --python | --models-dir)
            [ $# -ge 2 ] && [ -n "$2" ] || fail "$1 needs a value (./install.sh --help)"
            case $1 in
                --prefix) PREFIX=$2 ;;
                --python) PYTHON=$2 ;;
                --models-dir) MODELS_DIR=$2 ;;
            esac
            shift 2 ;;
        --no-models) WITH_MODELS=no; shift ;;
        -h | --help) usage; exit 0 ;;
        *) fail "unknown option '$1' (./install.sh --help)" ;;
    esac
done

# relative paths are the caller's: made absolute before the script moves into the bundle
absolute() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$(pwd)" "$1" ;; esac; }
PREFIX=$(absolute "$PREFIX")
[ -z "$MODELS_DIR" ] || MODELS_DIR=$(absolute "$MODELS_DIR")
case $PYTHON in */*) PYTHON=$(absolute "$PYTHON") ;; esac
umask 022  # the installation is software: readable by the service's user whatever the installer's umask
BUNDLE=$(cd "$(dirname "$0")" && pwd)
cd "$BUNDLE"

# -- 1. the bundle is whole and unchanged ------------------------------------------------------------------
[ -f SHA256SUMS ] || fail "SHA256SUMS is missing from $BUNDLE: the bundle is incomplete; extract the archive again"
command -v sha256sum >/dev/null 2>&1 || fail "sha256sum (GNU coreutils) is needed to check the bundle"
for needed in install.sh bundle.conf requirements.txt requirements-nodeps.txt; do
    grep -q "^[0-9a-f]\{64\}  $needed\$" SHA256SUMS || fail "SHA256SUMS does not list $needed: it is not the manifest of this bundle; extract the archive again"
done
echo "checking $(wc -l <SHA256SUMS) files against SHA256SUMS"
if ! report=$(LC_ALL=C sha256sum --check --strict --quiet SHA256SUMS 2>&1); then
    printf '%s\n' "$report" | sed 's/^/  /' >&2
    fail "the files above are missing or differ from SHA256SUMS: nothing was installed. Extract the archive again; if this repeats, compare its sha256 with the .tar.sha256 file made with it"
fi
# pip would take any wheel it finds in wheels/: a file nobody listed is refused too
unlisted=$(find . ! -type d | sed 's|^\./||' | LC_ALL=C sort \
    | awk 'NR == FNR { sub(/^[0-9a-f]+  /, ""); listed[$0] = 1; next } $0 != "SHA256SUMS" && !($0 in listed)' SHA256SUMS -)
if [ -n "$unlisted" ]; then
    printf "%s\n" "$unlisted" | sed "s/^/  /" >&2
    fail "the files above are not in SHA256SUMS: nothing was installed. Remove them, or extract the archive again into an empty directory"
fi

setting() { sed -n "s/^$1=//p" bundle.conf | head -n 1; }
VERSION=$(setting KUMIHO_CE_VERSION)
PYTHON_VERSION=$(setting PYTHON_VERSION)
MACHINE=$(setting MACHINE)
GLIBC=$(setting GLIBC)
CPU_FLAGS=$(setting CPU_FLAGS)
CHAT_MODELS=$(setting CHAT_MODELS)

# -- 2. the machine can run it -----------------------------------------------------------------------------
[ "$(uname -m)" = "$MACHINE" ] || fail "this bundle is for $MACHINE machines and this one is $(uname -m): make the bundle on a $(uname -m) machine"
if [ -n "$GLIBC" ]; then
    libc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
    [ -n "$libc" ] || fail "this bundle's libraries need glibc $GLIBC or newer and this system has no glibc (musl-based systems such as Alpine cannot use it)"
    [ "$(printf '%s\n%s\n' "$GLIBC" "$libc" | sort -V | head -n 1)" = "$GLIBC" ] \
        || fail "this bundle's libraries need glibc $GLIBC or newer and this system has glibc $libc: make the bundle on a system no newer than this one"
fi
if [ -n "$CPU_FLAGS" ] && [ -r /proc/cpuinfo ]; then
    flags=" $(grep -m 1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    lacking=
    for flag in $CPU_FLAGS; do
        case $flags in *" $flag "*) ;; *) lacking="$lacking $flag" ;; esac
    done
    [ -z "$lacking" ] || fail "this CPU lacks$lacking, which the bundled llama.cpp (the chat model's runtime) needs"
fi

python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
if [ -n "$PYTHON" ]; then
    found=$(python_version "$PYTHON") || fail "--python $PYTHON does not run as a Python interpreter"
    [ "$found" = "$PYTHON_VERSION" ] || fail "$PYTHON is Python $found, but this bundle's wheels are for Python $PYTHON_VERSION: pass --python /path/to/python$PYTHON_VERSION, or make the bundle with Python $found"
else
    for candidate in "python$PYTHON_VERSION" python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 && [ "$(python_version "$candidate")" = "$PYTHON_VERSION" ]; then
            PYTHON=$(command -v "$candidate")
            break
        fi
    done
    [ -n "$PYTHON" ] || fail "this bundle's wheels are for Python $PYTHON_VERSION and no python$PYTHON_VERSION is on PATH: install it, or pass --python /path/to/python$PYTHON_VERSION"
fi

# -- 3. the environment and the packages -------------------------------------------------------------------
VENV=$PREFIX/.venv
if [ -e "$VENV" ]; then
    found=$(python_version "$VENV/bin/python") || fail "$VENV exists but is not a Python environment: remove it or choose another --prefix"
    [ "$found" = "$PYTHON_VERSION" ] || fail "$VENV is a Python $found environment: remove it or choose another --prefix"
    echo "installing kumiho-ce $VERSION into the existing environment $VENV"
else
    mkdir -p "$PREFIX" 2>/dev/null || fail "cannot create $PREFIX: run as a user who may write there (sudo), or choose another --prefix"
    echo "creating the environment $VENV with $PYTHON"
    # without pip: Debian's and Ubuntu's Pythons have no ensurepip unless python3-venv is installed; pip comes
    # from the bundle's own wheel below
    "$PYTHON" -m venv --without-pip "$VENV" || fail "$PYTHON could not create a virtual environment in $VENV"
fi

export PIP_CONFIG_FILE=/dev/null  # no pip configuration file of this machine applies (find-links, constraints, …)
pip_wheel=$(ls wheels/pip-*.whl 2>/dev/null | head -n 1)
[ -n "$pip_wheel" ] || fail "wheels/ holds no pip wheel: this is not a complete bundle"
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    # a pip wheel runs as pip: it installs itself into the new environment
    "$VENV/bin/python" "$BUNDLE/$pip_wheel/pip" --isolated --disable-pip-version-check install --quiet \
        --no-index "$BUNDLE/$pip_wheel" || fail "pip could not be installed into $VENV"
fi
pip() { "$VENV/bin/python" -m pip --isolated --disable-pip-version-check "$@"; }
echo "installing $(wc -l <requirements.txt) packages from wheels/ (no index, no network)"
pip install --quiet --no-index --find-links "$BUNDLE/wheels" -r requirements.txt \
    || fail "pip could not install the bundle's wheels into $VENV (its message is above)"
if [ -s requirements-nodeps.txt ]; then
    pip install --quiet --no-index --find-links "$BUNDLE/wheels" --no-deps -r requirements-nodeps.txt \
        || fail "pip could not install requirements-nodeps.txt into $VENV (its message is above)"
fi
"$VENV/bin/kumiho-ce" version >/dev/null || fail "$VENV/bin/kumiho-ce does not start (its message is above)"

# -- 4. the models, apart from any data directory ----------------------------------------------------------
MODELS_TARGET=${MODELS_DIR:-$VENV/share/kumiho-ce/models}
if [ "$WITH_MODELS" = yes ] && [ -n "$CHAT_MODELS" ]; then
    # an empty data directory and no configuration file for this step: a copy in the installing user's data
    # directory does not count, and their configuration (or a KUMIHO_CE_CONFIG) must not redirect the install
    no_data=$(mktemp -d)
    for model in $CHAT_MODELS; do
        echo "installing the chat model $model into $MODELS_TARGET"
        env -u KUMIHO_CE_CONFIG -u XDG_CONFIG_HOME -u CONFIGURATION_DIRECTORY HOME="$no_data" \
            KUMIHO_CE_MODELS_DIR="$MODELS_TARGET" KUMIHO_CE_DATA_DIR="$no_data" \
            "$VENV/bin/kumiho-ce" models install "$model" --from "$BUNDLE/models" \
            || { rm -rf "$no_data"; fail "the chat model $model could not be installed (the message is above)"; }
    done
    rm -rf "$no_data"
fi

# -- 5. what next ------------------------------------------------------------------------------------------
cat <<EOF

kumiho-ce $VERSION is installed: $VENV/bin/kumiho-ce
EOF
if [ -n "$MODELS_DIR" ] && [ "$WITH_MODELS" = yes ]; then
    cat <<EOF
The chat model is in $MODELS_DIR: set models_dir = "$MODELS_DIR" in the configuration
(or KUMIHO_CE_MODELS_DIR=$MODELS_DIR) so that the appliance finds it.
EOF
fi
cat <<EOF

Next:
  check the installation:  $VENV/bin/kumiho-ce models list && $VENV/bin/kumiho-ce doctor
  start it by hand:        $VENV/bin/kumiho-ce serve
                           (http://127.0.0.1:9190, MCP at /mcp; data in ~/.local/share/kumiho-ce)
  or as a service:         the unit is $BUNDLE/systemd/kumiho-ce.service (it runs /opt/kumiho-ce/.venv/bin/kumiho-ce);
                           see "On a home server" in docs/install.md
EOF
