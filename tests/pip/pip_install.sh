#!/usr/bin/env bash
# pip_install.sh SOURCE_DIR PYTHON VERSION
# Builds the wheel of a copy of SOURCE_DIR with PYTHON, installs it into a fresh venv and checks that the
# commands work from there with no other step: iscope-run recording a Python program that imports
# inferscope_py, iscope-analyze reading the dump, python -m inferscope_py --version. Exits 77 (skipped, with
# the reason) when PYTHON has no venv or pip.
set -euo pipefail
SRC=$1 PY=$2 VERSION=$3
skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v "$PY" >/dev/null || fail "no Python at $PY"
"$PY" -c "import venv" 2>/dev/null || skip "$PY has no venv module (Debian: python3-venv)"
"$PY" -m pip --version >/dev/null 2>&1 || skip "$PY has no pip (Debian: python3-pip)"
"$PY" -c "import setuptools, wheel" 2>/dev/null || skip "$PY has no setuptools or wheel (Debian: python3-setuptools python3-wheel)"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
unset PYTHONPATH INFERSCOPE_LIBRARY INFERSCOPE_PYTHON_DIR INFERSCOPE_ENABLE
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

# A copy of the tree as a user has it (tracked and new files, not build folders), so the test never writes
# into the checkout and a file the build needs but the tree lacks fails here.
mkdir "$T/src"
if git -C "$SRC" rev-parse --show-toplevel >/dev/null 2>&1; then
  # (a tracked file deleted in the work tree stays absent: cp refuses it, which is what a user would have)
  (cd "$SRC" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$T/src/" -- 2>/dev/null || true)
else
  tar -C "$SRC" --exclude=./.git --exclude='./build*' -cf - . | tar -C "$T/src" -xf -
fi
[ -f "$T/src/pyproject.toml" ] || fail "no pyproject.toml copied from $SRC"

echo "=== pip wheel ($PY)"
# ccache hits across runs need paths relative to the temporary folder.
export CCACHE_BASEDIR=$T
(cd "$T/src" && "$PY" -m pip wheel --no-build-isolation --no-deps -w "$T/wheels" .)
whl=$(ls "$T"/wheels/inferscope_py-"$VERSION"-*.whl 2>/dev/null | head -1)
[ -n "$whl" ] || fail "no wheel inferscope_py-$VERSION-*.whl in $T/wheels: $(ls "$T/wheels")"
echo "wheel: $(basename "$whl")"
# The license travels with the wheel and its metadata names it.
# (dist-info/LICENSE with older setuptools, dist-info/licenses/LICENSE with those writing metadata 2.4)
"$PY" -c 'import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
sys.exit(0 if any(".dist-info/" in n and n.endswith("/LICENSE") for n in names) else 1)' "$whl" ||
  fail "the wheel holds no LICENSE: $("$PY" -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).namelist())' "$whl")"
"$PY" -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith("dist-info/METADATA"))).decode()
sys.exit(0 if "Apache-2.0" in meta else 1)' "$whl" || fail "the wheel METADATA does not name the Apache-2.0 license"

echo "=== venv + pip install"
# --system-site-packages --without-pip: Debian's pip (python3-pip) runs inside the venv, nothing is downloaded.
"$PY" -m venv --system-site-packages --without-pip "$T/venv"
# When PYTHON is itself a venv (the GPU machine's torch lives in one), --system-site-packages reaches only the
# base interpreter's packages: a .pth naming PYTHON's own site-packages makes them visible as well.
"$PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
  > "$("$T/venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/outer-site.pth"
"$T/venv/bin/python" -m pip install --no-deps "$whl"

mkdir "$T/run" && cd "$T/run"
echo "=== from the venv, as after 'source venv/bin/activate'"
export PATH="$T/venv/bin:$PATH"
[ "$(command -v iscope-run)" = "$T/venv/bin/iscope-run" ] || fail "iscope-run on PATH is $(command -v iscope-run)"
where=$(python3 -c 'import inferscope_py, os; print(os.path.dirname(inferscope_py.__file__))')
case "$where" in "$T/venv/"*) ;; *) fail "inferscope_py imported from $where, not from the venv" ;; esac
out=$(python3 -m inferscope_py --version)
[ "$out" = "inferscope_py $VERSION" ] || fail "python -m inferscope_py --version printed '$out'"
iscope-run --version | grep -qF "$VERSION" || fail "iscope-run --version: $(iscope-run --version)"
iscope-analyze --version | grep -qF "$VERSION" || fail "iscope-analyze --version: $(iscope-analyze --version)"
iscope-config show >/dev/null || fail "iscope-config show"
iscope-diff --version | grep -qF "$VERSION" || fail "iscope-diff --version: $(iscope-diff --version)"

out=$(iscope-run -o venv.iscope -- python3 -c '
import inferscope_py
def work(): return sum(range(1000))
for _ in range(3): work()
print(1)')
[ "$out" = "1" ] || fail "the program under iscope-run printed '$out'"
[ -s venv.iscope ] || fail "iscope-run wrote no dump"
iscope-analyze venv.iscope --summary > summary.md || fail "iscope-analyze --summary"
cat summary.md
grep -q '^| `work` | 3 |' summary.md || fail "the summary has no Python function 'work': the Python collector did not record"
iscope-analyze venv.iscope -o report.md || fail "iscope-analyze -o report.md"
[ -s report.md ] || fail "empty report"

echo "=== the venv not activated: its iscope-run profiling $PY"
PATH=${PATH#"$T/venv/bin:"}
out=$("$T/venv/bin/iscope-run" -o plain.iscope -- "$PY" -c 'import inferscope_py; print(inferscope_py.is_active())')
[ "$out" = "True" ] || fail "under the venv's iscope-run, $PY printed '$out' (expected True)"
"$T/venv/bin/iscope-analyze" plain.iscope --summary >/dev/null || fail "iscope-analyze plain.iscope"

# Where torch with a CUDA device is importable (the GPU machine): a GPU step under the venv's iscope-run.
if reason=$("$T/venv/bin/python" -c 'import torch, sys
sys.exit(0) if torch.cuda.is_available() else print("torch has no CUDA device") or sys.exit(1)' 2>&1); then
  echo "=== torch $("$T/venv/bin/python" -c 'import torch; print(torch.__version__)') with CUDA, from the venv"
  "$T/venv/bin/iscope-run" -o torch.iscope -- "$T/venv/bin/python" -c '
import torch
x = torch.randn(1024, 1024, device="cuda")
def step():
    return (x @ x).sum().item()
for _ in range(8): step()' || fail "iscope-run of a torch program"
  "$T/venv/bin/iscope-analyze" torch.iscope --json torch.json -o torch.md || fail "iscope-analyze torch.iscope"
  "$T/venv/bin/python" -c 'import json, sys
r = json.load(open("torch.json"))
kernels = r["tables"]["kernels"]
sys.exit(0 if kernels and r["gpu_work_recorded"] else 1)' || fail "the torch program's dump holds no kernels"
  echo "torch under the venv's iscope-run: kernels recorded and analysed"
else
  echo "torch with CUDA: not checked here (${reason:-torch is not importable})"
fi
echo "pip install test: $(basename "$whl") built, installed and working"
