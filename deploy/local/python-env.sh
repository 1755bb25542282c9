#!/usr/bin/env bash
# The project-local Python venv (.local/venv) with deploy/local/python-requirements.txt installed;
# fast when it is already there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
root="$(cd "$here/../.." && pwd -P)"
venv="$root/.local/venv"
requirements="$here/python-requirements.txt"
stamp="$venv/.requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$requirements" "$stamp"; then
    exit 0
fi
echo "==> installing the Python tools into $venv (deploy/local/python-requirements.txt)"
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
