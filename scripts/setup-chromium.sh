#!/usr/bin/env bash
# Install Debian's headless-capable Chromium for the report test (tests/report_html.rs).
# Idempotent: does nothing when chromium is already on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium: $(command -v chromium) is installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "error: chromium is missing and installing it needs root: sudo apt-get install chromium" >&2
  exit 1
fi
echo "chromium: installing Debian's package (apt-get)" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
echo "chromium: $(chromium --version 2>/dev/null || echo installed)"
