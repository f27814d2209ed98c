#!/usr/bin/env bash
# A new user's first run, timed, following the README's quick start word for word:
#   git clone → npm ci → npm start → green /healthz → `pixgate listen` to a local receiver →
#   `pixgate trigger payout.confirmed` → the cash-out to maria@example.com → a pix.payout.confirmed
#   verified by the receiver with the SDK's verifyWebhook.
# Prints one line per step and the total; the README's figure comes from here.
#
# Usage: scripts/first-run.sh [REPOSITORY]   (default: this checkout's committed HEAD)
#   PORT=8080           the server's port (the README's default; set another when 8080 is taken)
#   RECEIVER_PORT=3000  the webhook receiver's port (the README's http://localhost:3000/webhooks)
#   KEEP=1              keep the clone (printed) instead of deleting it
#   COLD_CACHE=1        npm ci with an empty npm cache (every package downloaded), as on a new machine
set -euo pipefail

repo=${1:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
port=${PORT:-8080}
receiver_port=${RECEIVER_PORT:-3000}
work=$(mktemp -d "${TMPDIR:-/tmp}/pixgate-first-run.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP:-}" == 1 ]]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# Waits until file $1 matches regex $2, at most $3 seconds.
wait_for() {
  local deadline=$(($(date +%s) + $3))
  until grep -Eq "$2" "$1" 2>/dev/null; do
    if (($(date +%s) > deadline)); then echo "first-run: timed out waiting for /$2/ in $1:" >&2; tail -20 "$1" >&2; exit 1; fi
    sleep 0.1
  done
}

t0=$(now)
git clone --quiet "$repo" "$work/pixgate"
cd "$work/pixgate"
echo "clone                 $(since "$t0") s"

t=$(now)
if [[ "${COLD_CACHE:-}" == 1 ]]; then export npm_config_cache="$work/npm-cache"; fi
npm ci >"$work/npm-ci.log" 2>&1 || { tail -30 "$work/npm-ci.log"; exit 1; }
echo "npm ci                $(since "$t") s$([[ "${COLD_CACHE:-}" == 1 ]] && echo " (empty npm cache)" || echo " (npm cache as found)")"

# npm start in its own process group (stopped as a group at the end), its data in ./data as the README says.
t=$(now)
PORT=$port setsid npm start >"$work/server.log" 2>&1 &
pids+=($!)
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
  if ! kill -0 "${pids[0]}" 2>/dev/null; then echo "first-run: npm start exited:" >&2; cat "$work/server.log" >&2; exit 1; fi
  if (($(date +%s) - ${t%.*} > 120)); then echo "first-run: no /healthz after 120 s" >&2; tail -30 "$work/server.log" >&2; exit 1; fi
  sleep 0.1
done
echo "npm start → /healthz  $(since "$t") s"

# The receiver of the README's step 2: verifies every delivery with the SDK, over the raw body.
t=$(now)
cat >.first-run-receiver.mjs <<'EOF'
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { verifyWebhook } from '@pixgate/sdk';
createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    try {
      const secret = readFileSync('.first-run-secret', 'utf8').trim();
      const { event } = await verifyWebhook({ rawBody: Buffer.concat(chunks), headers: req.headers, secret });
      console.log(`verified ${event.event} ${event.transaction_id ?? ''}`);
      res.writeHead(200).end();
    } catch (err) {
      console.log(`refused ${err.message}`);
      res.writeHead(400).end();
    }
  });
}).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('receiver ready'));
EOF
setsid node .first-run-receiver.mjs "$receiver_port" >"$work/receiver.log" 2>&1 &
pids+=($!)
wait_for "$work/receiver.log" 'receiver ready' 30

setsid npm run pixgate -- listen --forward-to "http://localhost:$receiver_port/webhooks" >"$work/listen.log" 2>&1 &
pids+=($!)
wait_for "$work/listen.log" 'webhook secret whsec_' 60
grep -Eo 'whsec_[A-Za-z0-9+/=]+' "$work/listen.log" | head -1 >.first-run-secret

npm run pixgate -- trigger payout.confirmed >"$work/trigger.log" 2>&1 || { cat "$work/trigger.log"; exit 1; }
npm run pixgate -- api POST /pix/cash-out -d '{"amount": 1590, "pix_key": "maria@example.com", "pix_key_type": "email"}' >"$work/cash-out.log" 2>&1 || { cat "$work/cash-out.log"; exit 1; }
cash_out=$(grep -Eo 'PIXOUT[0-9A-Z]+' "$work/cash-out.log" | head -1)
wait_for "$work/receiver.log" "verified pix.payout.confirmed $cash_out" 60
if grep -q '^refused' "$work/receiver.log"; then echo "first-run: a delivery did not verify:" >&2; cat "$work/receiver.log" >&2; exit 1; fi
echo "quick start → verified pix.payout.confirmed  $(since "$t") s  (cash-out $cash_out)"
echo "total: clone → verified webhook  $(since "$t0") s"
