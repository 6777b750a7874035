#!/usr/bin/env bash
# test_openapi.sh SRCDIR CULPRITD: docs/openapi.yaml is a valid OpenAPI 3.0 description
# (openapi-spec-validator, when installed), every operation has a unique operationId, info
# has a license, and /healthz and /readyz state their 4xx answers. The routes culpritd
# answers (culpritd --routes: its route tables) are the operations of docs/openapi.yaml and,
# under /api/v1, the endpoint headings of docs/api.md: none missing, none extra (HEAD is
# GET's, so a HEAD operation needs no route of its own).
set -euo pipefail
spec=$1/docs/openapi.yaml
if command -v openapi-spec-validator >/dev/null; then openapi-spec-validator "$spec"; fi
routes=$("$2" --routes)
python3 - "$spec" "$1/docs/api.md" "$routes" <<'PY'
import re, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
bad = []
code = set(sys.argv[3].split("\n"))
spec = {f"{m.upper()} {p}" for p, item in d["paths"].items() for m in item
        if m in ("get", "post", "put", "delete", "patch", "options", "trace")}
md = {f"{m} {p}" for line in open(sys.argv[2]) if line.startswith("### ")
      for m, p in re.findall(r"\b(GET|HEAD|POST|PUT|DELETE|PATCH) (/[^\s?,]*)", line)}
api = {r for r in code if r.split(" ")[1].startswith("/api/v1/")}
bad += [f"{r}: answered by culpritd, not in docs/openapi.yaml" for r in sorted(code - spec)]
bad += [f"{r}: in docs/openapi.yaml, not answered by culpritd" for r in sorted(spec - code)]
bad += [f"{r}: answered by culpritd, no heading in docs/api.md" for r in sorted(api - md)]
bad += [f"{r}: a heading in docs/api.md, not answered by culpritd" for r in sorted(md - api)]
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
