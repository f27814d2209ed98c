"""Checks of every answer against the document: declared status, Content-Type and body schema (also of each SSE event)."""
import json

from jsonschema import Draft202012Validator

from fuzz_http import snake_keys
from fuzz_standard import tolerated, transport


class ResponseChecks:
    """Mixin of the Fuzzer: needs self.validators, self.registry, self.conv, self.problems, self.status_counts, self.per_op."""

    def validator(self, pointer):
        v = self.validators.get(pointer)
        if v is None:
            v = Draft202012Validator({"$ref": "urn:pixgate:openapi#" + pointer}, registry=self.registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
            self.validators[pointer] = v
        return v

    def problem(self, op_key, kind, detail, req):
        sig = f"{op_key} | {kind}"
        entry = self.problems.setdefault(sig, [0, None])
        entry[0] += 1
        if entry[1] is None:
            entry[1] = {"detail": detail, "request": req}

    def check(self, op_key, path, method, op, req, res):
        status = str(res.status)
        self.status_counts[res.status] += 1
        self.per_op[op_key][res.status] += 1
        responses = op.get("responses", {})
        declared = responses.get(status) or responses.get(f"{status[0]}XX") or responses.get("default")
        if res.status >= 500 and not (res.status == 503 and declared):
            self.problem(op_key, f"{res.status} answer", res.body[:500].decode("utf-8", "replace"), req)
        if declared is None and transport(self, res.status):
            return
        if declared is None and tolerated(self, method, res.status):
            if not res.headers.get("content-type", "").startswith("application/problem+json"):
                self.problem(op_key, f"tolerated {status} without a problem body", res.body[:300].decode("utf-8", "replace"), req)
            return
        if declared is None:
            self.problem(op_key, f"undeclared status {status}", res.body[:500].decode("utf-8", "replace"), req)
            return
        content = declared.get("content") or {}
        ctype = res.headers.get("content-type", "").split(";")[0].strip().lower()
        if not content:
            if res.body and ctype == "application/json":
                self.problem(op_key, f"{status}: a body where the document declares none", res.body[:300].decode("utf-8", "replace"), req)
            return
        if ctype not in content:
            self.problem(op_key, f"{status}: Content-Type {ctype or 'none'} not in {sorted(content)}", res.body[:300].decode("utf-8", "replace"), req)
            return
        media = content[ctype]
        esc = path.replace("~", "~0").replace("/", "~1")
        pointer = f"/paths/{esc}/{method}/responses/{status}/content/{ctype.replace('/', '~1')}/schema"
        if ctype == "application/json":
            try:
                body = res.json()
            except ValueError:
                self.problem(op_key, f"{status}: body is not JSON", res.body[:300].decode("utf-8", "replace"), req)
                return
            # pixgate's merchant API renames keys under X-Key-Case; the API Pix standard (--standard) does not.
            if not getattr(self, "bearer", None) and str(req["headers"].get("X-Key-Case", "")).strip().lower() == "camelcase":
                body = snake_keys(body)  # the document: a camelCase exchange is the same with keys renamed
            if "schema" in media:
                errors = sorted(self.validator(pointer).iter_errors(body), key=lambda e: list(e.absolute_path))
                if errors:
                    e = errors[0]
                    self.problem(op_key, f"{status}: body outside the schema at /{'/'.join(map(str, e.absolute_path))}", f"{e.message[:400]} — body {res.body[:400].decode('utf-8', 'replace')}", req)
        elif ctype == "text/event-stream" and res.body:
            self.check_sse(op_key, path, method, status, media, res.body, req)

    def check_sse(self, op_key, path, method, status, media, raw, req):
        """Each event's `data` must validate against the schema the document gives for it (x-itemSchema)."""
        item = media.get("x-itemSchema")
        if not item:
            return
        data_schema = self.conv.resolve(item).get("properties", {}).get("data", {})
        target = data_schema.get("contentSchema")
        for block in raw.decode("utf-8", "replace").split("\n\n"):
            lines = [l for l in block.split("\n") if l and not l.startswith(":")]
            data = "\n".join(l[5:].lstrip(" ") for l in lines if l.startswith("data:"))
            if not data or not target:
                continue
            try:
                value = json.loads(data)
            except ValueError:
                self.problem(op_key, f"{status}: SSE data is not JSON", data[:300], req)
                continue
            esc = path.replace("~", "~0").replace("/", "~1")
            pointer = f"/paths/{esc}/{method}/responses/{status}/content/text~1event-stream/x-itemSchema/properties/data/contentSchema"
            errors = list(self.validator(pointer).iter_errors(value))
            if errors:
                self.problem(op_key, f"{status}: SSE event outside the schema", errors[0].message[:300], req)
