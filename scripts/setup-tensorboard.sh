#!/usr/bin/env bash
# Install TensorBoard from PyPI into a venv for the event-file test (tests/tensorboard.rs),
# which reads attnres's event files with TensorBoard's own reader. Idempotent: does nothing
# when the venv already has this version.
set -euo pipefail
VENV="${1:?usage: setup-tensorboard.sh VENV}"
VERSION=2.21.0
if "$VENV/bin/python" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '$VERSION')" 2>/dev/null; then
  echo "tensorboard: $VERSION in $VENV"
  exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "tensorboard==$VERSION"
echo "tensorboard: $("$VENV/bin/python" -c 'import tensorboard; print(tensorboard.__version__)') in $VENV"
