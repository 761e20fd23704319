#!/usr/bin/env bash
# Remakes the screenshots in docs/gui/ (docs/gui.md shows them): the browser tests that walk
# each screen save them when STEELFRAME_TEST_SCREENSHOTS names a folder (the axe walk at
# 1280x800 and 390x844: `-phone` names). Needs Chromium and
# Xvfb (apt-get install chromium xvfb). Usage: bash docs/gui/make-screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export STEELFRAME_TEST_SCREENSHOTS="$PWD/docs/gui"
.venv/bin/python -m pytest -p no:cacheprovider -q \
  tests/browser/test_gui_loop.py tests/browser/test_gui_a11y.py tests/browser/test_desktop.py \
  -k "loop or axe or desktop"
ls -1 docs/gui/*.png
