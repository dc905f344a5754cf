#!/usr/bin/env bash
# A stamp of the sources the extension is built from (csrc/ and CMakeLists.txt, by content):
# what scripts/gpu_prebuild.sh writes beside the module it builds, and what scripts/gpu_check.sh
# compares with the tree it runs in, so that a module built from other sources is never tested
# as this tree's. By content, not by git: the GPU machine's copy of the tree has no .git.
set -euo pipefail
cd "$(dirname "$0")/.."
find csrc CMakeLists.txt -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum |
  cut -c1-16
