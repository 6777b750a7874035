#!/usr/bin/env bash
# test_openapi.sh SRCDIR: docs/openapi.yaml is a valid OpenAPI 3.0 description
# (openapi-spec-validator, when installed), every operation has a unique operationId, info
# has a license, and /healthz and /readyz state their 4xx answers.
set -euo pipefail
spec=$1/docs/openapi.yaml
if command -v openapi-spec-validator >/dev/null; then openapi-spec-validator "$spec"; fi
python3 - "$spec" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
bad = []
ids = {}
for path, item in d["paths"].items():
    for m, op in item.items():
        if m not in ("get", "head", "post", "put", "delete", "patch", "options", "trace"):
            continue
        oid = op.get("operationId")
        if not oid:
            bad.append(f"{m.upper()} {path}: no operationId")
        elif oid in ids:
            bad.append(f"{m.upper()} {path}: operationId {oid} also on {ids[oid]}")
        else:
            ids[oid] = f"{m.upper()} {path}"
        if path in ("/healthz", "/readyz") and not any(str(c).startswith("4") for c in op["responses"]):
            bad.append(f"{m.upper()} {path}: no 4xx answer")
if not d["info"].get("license", {}).get("name"):
    bad.append("info.license has no name")
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
echo ok
