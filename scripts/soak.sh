#!/usr/bin/env bash
# Soak (issue 11, item 8): the real cluster-mode server (build/isolation-gate serve --kubeconfig ...)
# against the repository's test API server (tests/apiserver/fake_apiserver.py) at steady load, while
# the serving certificate rotates every minute, Components churn and watches are dropped. Exits
# non-zero on any failed request, any allowed undecidable request, any wrong answer, RSS growth of 5%
# or more after warm-up, or fd growth. tests/soak/soak.py does the work; see its --help.
#   scripts/soak.sh                                  # 30 minutes
#   scripts/soak.sh --duration 2m                    # what scripts/test.sh runs
#   scripts/soak.sh --duration 30m --doc docs/security.md   # and write the figures into the doc
# Environment: IG_BINARY (default build/isolation-gate).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export IG_SOURCE_DIR="$root"
export IG_BINARY="${IG_BINARY:-$root/build/isolation-gate}"
if [[ ! -x "$IG_BINARY" ]]; then
  echo "soak: $IG_BINARY is missing; build it first (ninja -C build isolation-gate)" >&2
  exit 2
fi
# The soak's own checks first (no server; well under a second).
if ! checks="$(/usr/bin/python3 -m unittest discover -s "$root/tests/soak" -p 'test_*.py' 2>&1)"; then
  echo "$checks" >&2
  exit 1
fi
exec /usr/bin/python3 "$root/tests/soak/soak.py" "$@"
