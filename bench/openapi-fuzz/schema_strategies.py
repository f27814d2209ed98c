"""A small JSON Schema (2020-12, the subset OpenAPI 3.1 documents use) → hypothesis strategy converter.

Covers: $ref (within the document), anyOf/oneOf, allOf (merged), const, enum, type (and type lists),
null, boolean, integer and number (minimum/maximum, exclusive bounds, multipleOf), string
(minLength/maxLength, pattern, format date-time/date/email/uri/uuid), array (items, minItems,
maxItems, uniqueItems), object (properties, required, additionalProperties). Patterns are translated
from ECMA-262 to Python where they differ for simple patterns (\\d and \\w are ASCII in ECMA).
"""
import re
import string

from hypothesis import strategies as st

ASCII_DIGIT = "[0-9]"
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 53), 2 ** 53), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
ANY_JSON = st.recursive(JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=8)


def ecma_to_python(pattern):
    """\\d, \\w, \\s as ECMA-262 reads them (ASCII digits and word characters; whitespace: its ASCII part)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            if n == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif n == "w":
                out.append("A-Za-z0-9_" if in_class else "[A-Za-z0-9_]")
            elif n == "s":  # ECMA's \s is not Python's (U+001C-U+001F, U+0085); use the ASCII part both share
                out.append(" \t\n\r\x0b\x0c" if in_class else "[ \t\n\r\x0b\x0c]")
            else:
                out.append(c + n)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


class Converter:
    def __init__(self, document):
        self.doc = document
        self.depth = 0

    def resolve(self, schema):
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            assert ref.startswith("#/"), ref
            node = self.doc
            for part in ref[2:].split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**node, **rest} if rest else node
            seen += 1
            if seen > 50:
                raise ValueError("ref loop")
        return schema

    def merged(self, schemas):
        out = {}
        for s in schemas:
            s = self.resolve(s)
            for k, v in s.items():
                if k == "properties":
                    out.setdefault("properties", {}).update(v)
                elif k == "required":
                    out["required"] = sorted(set(out.get("required", [])) | set(v))
                else:
                    out[k] = v
        return out

    def strategy(self, schema):
        schema = self.resolve(schema if schema is not None else {})
        if schema is True or schema == {}:
            return ANY_JSON
        if schema is False:
            return st.nothing()
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.strategy(self.merged(schema["allOf"] + [rest]))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k not in (key, "description")}
                branches = [self.merged([b, rest]) if rest else b for b in schema[key]]
                return st.one_of(*[self.strategy(b) for b in branches])
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        t = schema.get("type")
        if isinstance(t, list):
            return st.one_of(*[self.strategy({**schema, "type": x}) for x in t])
        if t is None:
            if "properties" in schema:
                t = "object"
            elif "items" in schema:
                t = "array"
            else:
                return ANY_JSON
        return getattr(self, "_" + t)(schema)

    def _null(self, s):
        return st.none()

    def _boolean(self, s):
        return st.booleans()

    def _integer(self, s):
        lo, hi = s.get("minimum"), s.get("maximum")
        if "exclusiveMinimum" in s:
            lo = int(s["exclusiveMinimum"]) + 1
        if "exclusiveMaximum" in s:
            hi = int(s["exclusiveMaximum"]) - 1
        lo = None if lo is None else int(lo)
        hi = None if hi is None else int(hi)
        base = st.integers(min_value=lo, max_value=hi)
        # Bias towards the bounds and small values (where the edge cases are).
        edges = [x for x in (lo, hi, 0, 1) if x is not None and (lo is None or x >= lo) and (hi is None or x <= hi)]
        strat = st.one_of(base, st.sampled_from(edges)) if edges else base
        if "multipleOf" in s:
            m = s["multipleOf"]
            strat = strat.map(lambda x: x - x % m).filter(lambda x: (lo is None or x >= lo) and (hi is None or x <= hi))
        return strat

    def _number(self, s):
        lo, hi = s.get("minimum"), s.get("maximum")
        return st.one_of(self._integer(s), st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False))

    def _string(self, s):
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        fmt = s.get("format")
        if "pattern" in s:
            try:
                strat = st.from_regex(re.compile(ecma_to_python(s["pattern"])), fullmatch=True)
            except re.error:
                strat = st.text(min_size=lo, max_size=hi if hi is not None else 64)
            return strat.filter(lambda x: len(x) >= lo and (hi is None or len(x) <= hi))
        if fmt == "date-time":
            strat = st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")
        elif fmt == "date":
            strat = st.dates().map(lambda d: d.isoformat())
        elif fmt == "email":
            word = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=12)
            strat = st.builds(lambda a, b: f"{a}@{b}.com", word, word)
        elif fmt in ("uri", "url"):
            strat = st.builds(lambda p: f"http://127.0.0.1/{p}", st.text(string.ascii_letters, max_size=10))
        elif fmt == "uuid":
            strat = st.uuids().map(str)
        else:
            strat = st.text(min_size=lo, max_size=hi if hi is not None else max(lo, 64))
            return strat
        return strat.filter(lambda x: len(x) >= lo and (hi is None or len(x) <= hi))

    def _array(self, s):
        items = s.get("items", {})
        lo, hi = s.get("minItems", 0), s.get("maxItems")
        hi = min(hi if hi is not None else lo + 5, lo + 5)
        inner = self.strategy(items)
        if s.get("uniqueItems"):
            import json as _json
            return st.lists(inner, min_size=lo, max_size=hi, unique_by=lambda v: _json.dumps(v, sort_keys=True))
        return st.lists(inner, min_size=lo, max_size=hi)

    def _object(self, s):
        props = s.get("properties", {})
        required = [k for k in s.get("required", []) if k in props]
        optional = [k for k in props if k not in required]
        req = {k: self.strategy(props[k]) for k in required}
        opt = {k: self.strategy(props[k]) for k in optional}
        base = st.fixed_dictionaries(req, optional=opt)
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            more = st.dictionaries(st.text(string.ascii_lowercase, min_size=1, max_size=8).filter(lambda k: k not in props), self.strategy(extra), max_size=3)
            return st.builds(lambda a, b: {**b, **a}, base, more)
        # Lower bound on properties with only additionalProperties (e.g. a record)
        if not props and s.get("minProperties"):
            return st.dictionaries(st.text(min_size=1, max_size=8), ANY_JSON, min_size=s["minProperties"], max_size=s["minProperties"] + 2)
        return base
