#!/usr/bin/env bash
# Builds puremetal, serves the embedded tiny model on a free loopback port,
# waits for /health, runs the official openai npm package's checks
# (client.mjs) against it and stops the server with SIGTERM, which must
# shut it down cleanly. Exit status nonzero on any failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "== building puremetal"
(cd "$root" && go build -o "$work/puremetal" ./cmd/puremetal)

echo "== npm ci"
(cd "$here" && npm ci --no-audit --no-fund)

echo "== puremetal serve (the embedded tiny model)"
"$work/puremetal" serve -addr 127.0.0.1:0 -max-len 256 2>"$work/serve.log" &
pid=$!
url=""
for _ in $(seq 600); do
	url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.log" | head -n 1 || true)
	[ -n "$url" ] && break
	if ! kill -0 "$pid" 2>/dev/null; then
		cat "$work/serve.log"; echo "puremetal serve exited before listening"; exit 1
	fi
	sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; echo "puremetal serve did not listen within a minute"; exit 1; }
health() { node -e 'fetch(process.argv[1]).then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$url/health"; }
for _ in $(seq 100); do health && break; sleep 0.1; done
health || { cat "$work/serve.log"; echo "$url/health does not answer"; exit 1; }
echo "serving at $url"

echo "== openai-node checks"
status=0
(cd "$here" && PUREMETAL_URL="$url" node client.mjs) || status=$?

echo "== stopping the server (SIGTERM)"
kill -TERM "$pid"
serve_status=0
wait "$pid" || serve_status=$?
pid=""
cat "$work/serve.log"
if [ "$serve_status" -ne 0 ]; then
	echo "puremetal serve exited with status $serve_status"; exit 1
fi
exit "$status"
