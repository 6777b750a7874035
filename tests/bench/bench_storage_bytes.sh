#!/usr/bin/env bash
# bench_storage_bytes.sh: bytes and rows that one rank-step (an iteration of one rank with its
# phases, kernels aside) costs in PostgreSQL. Streams case5 (12,960 ranks, 8 phases an
# iteration) through `culprit sim` into a real culpritd writing to a private PostgreSQL, then
# divides the size of the phase and iteration tables (heap, indexes, every partition, after
# VACUUM) by the rank-steps stored.
#   tests/bench/bench_storage_bytes.sh [BUILD_DIR] [ITERS]     (default build/rel, 12: case5's)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/rel} iters=${2:-12}
tmp=$(mktemp -d /tmp/culprit-bytes.XXXXXX)
chmod 755 "$tmp"
pid=
cleanup() {
	[ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	tests/pg.sh stop "$tmp/pg"
	rm -rf "$tmp"
}
trap cleanup EXIT
dsn=$(tests/pg.sh start "$tmp/pg")
psql "$dsn" -qAtc "CREATE DATABASE bytes"
dsn="${dsn/dbname=postgres/dbname=bytes}"
port=$((20000 + RANDOM % 20000))
"$build/server/culpritd" --data-dir "$tmp" --db "$dsn" --agent-listen "127.0.0.1:$port" \
	--http-listen "127.0.0.1:$((port + 1))" --max-connections-per-addr 20000 >"$tmp/culpritd.log" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$((port + 1))/readyz" >/dev/null; do
	kill -0 "$pid" || { cat "$tmp/culpritd.log"; exit 1; }
	sleep 0.2
done
"$build/client/culprit" sim --scenario case5 --iters "$iters" --speed 0 --quiet --server "127.0.0.1:$port"
want=$((12960 * iters))
until [ "$(psql "$dsn" -qAtc "SELECT count(*) FROM iterations")" -ge "$want" ]; do sleep 0.5; done
kill -TERM "$pid"; wait "$pid" || true; pid=
psql "$dsn" -qAtc "VACUUM ANALYZE" >/dev/null
psql "$dsn" -qAt -F ' ' <<SQL
SELECT 'rank-steps', count(*) FROM iterations;
SELECT 'phase records', count(*) FROM phases;
SELECT 'table ' || c.relname, sum(pg_total_relation_size(t.relid)), sum(t.n)
FROM pg_class c
CROSS JOIN LATERAL (SELECT p.relid, (SELECT reltuples FROM pg_class WHERE oid = p.relid)::bigint AS n
                    FROM pg_partition_tree(c.oid) p WHERE p.isleaf) t
WHERE c.relkind = 'p' AND c.relname IN ('iterations', 'phases', 'steps')
GROUP BY c.relname
UNION ALL SELECT 'table phase_sets', pg_total_relation_size(c.oid), greatest(c.reltuples, 0)::bigint
FROM pg_class c WHERE c.relname = 'phase_sets';
WITH s AS (SELECT sum(pg_total_relation_size(p.relid)) AS bytes,
                  sum((SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = p.relid)) AS n
           FROM pg_class c CROSS JOIN LATERAL pg_partition_tree(c.oid) p
           WHERE c.relkind = 'p' AND c.relname IN ('iterations', 'phases', 'steps') AND p.isleaf)
SELECT 'bytes per rank-step', round((s.bytes + coalesce(pg_total_relation_size(to_regclass('phase_sets')), 0))::numeric / $want, 1), 'rows per rank-step', round(s.n::numeric / $want, 3) FROM s;
SQL
