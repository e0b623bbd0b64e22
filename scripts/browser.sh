#!/usr/bin/env bash
# The browser the console's tests drive: Debian's `chromium` package (headless), never a
# downloaded browser. Installs it when missing (root: apt-get), else says what to install.
set -euo pipefail
command -v chromium >/dev/null && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "browser: the console's tests need Debian's chromium package: sudo apt-get install chromium" >&2
  exit 1
fi
echo "browser: installing chromium (Debian's package)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
