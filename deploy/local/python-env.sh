#!/usr/bin/env bash
# The project-local Python venv (.local/venv) with deploy/local/python-requirements.txt installed;
# fast when it is already there.
#
# The venv itself lives in the machine-wide cache that install.sh keeps its librdkafka trees in
# (BUILD_CACHE_DIR, env.sh: ~/.cache/beacon-attendance), keyed by the requirements and the
# interpreter, and .local/venv links to it: another clone of the project finds it there instead of
# installing the same packages again. With BUILD_CACHE_DIR empty, .local/venv is the venv.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deploy/local/env.sh
source "$here/env.sh"
venv="$LOCAL/venv"
requirements="$here/python-requirements.txt"
cache="$BUILD_CACHE_DIR"

# ready DIR: DIR holds a venv with exactly these requirements installed.
ready() { [[ -x "$1/bin/python" && -f "$1/.requirements" ]] && cmp -s "$requirements" "$1/.requirements"; }

# create DIR: a venv in DIR with the requirements installed, marked ready last.
create() {
    echo "==> installing the Python tools into $1 (deploy/local/python-requirements.txt)"
    [[ -x "$1/bin/python" ]] || python3 -m venv "$1"
    "$1/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$1/.requirements"
}

if [[ -z "$cache" ]]; then
    [[ ! -L "$venv" ]] || rm -f "$venv"
    ready "$venv" || create "$venv"
    exit 0
fi
key="$({ cat "$requirements"; python3 --version; } | sha256sum | cut -c1-16)"
target="$cache/python-venv-$key"
if ! ready "$target"; then
    mkdir -p "$cache"
    # One clone at a time creates it; the others wait, then find it ready.
    exec 9>"$target.lock"
    flock 9
    ready "$target" || create "$target"
    exec 9>&-
fi
if [[ "$(readlink "$venv" 2>/dev/null)" != "$target" ]]; then
    mkdir -p "$(dirname "$venv")"
    # A venv of the layout before the cache, or a link to other requirements.
    rm -rf "$venv"
    ln -s "$target" "$venv"
fi
