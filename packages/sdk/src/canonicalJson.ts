/**
 * Canonical JSON for request signatures (spec, "Body normalization"):
 *  1. parse the body;
 *  2. re-serialize with object keys sorted (at every depth);
 *  3. compact: no whitespace between tokens;
 *  4. strings as raw UTF-8 with the minimal escapes (`\"`, `\\`, `\b \f \n \r \t`, `\u00XX` for
 *     other control characters, `\uXXXX` for lone surrogates): `\/`, `\u00e9` and `é` are the
 *     same string and all come out as `/` and `é`;
 *  5. string contents are never altered otherwise (`": "` inside a string stays).
 *
 * Numbers keep the exact text they were sent with (`100`, `100.0` and `1e2` are different
 * canonical forms): the client signs what it sends, and no precision is lost to floating point.
 * Keys are sorted by Unicode code point (the order of Python's `sort_keys`, and of JavaScript's
 * default sort except for characters beyond U+FFFF). A key repeated in one object keeps its last
 * value, as JSON.parse does.
 *
 * This is the exact string format JavaScript's JSON.stringify and Python's
 * `json.dumps(obj, sort_keys=True, separators=(',', ':'), ensure_ascii=False)` produce for the
 * same data.
 */

export class CanonicalJsonError extends Error {
  override name = 'CanonicalJsonError';
}

/** A valid JSON text that pixgate does not accept as a request body (see parseJson). */
export class JsonContentError extends Error {
  override name = 'JsonContentError';
}

export const NUL_MESSAGE = 'Request body strings must not contain the character U+0000';
export const SURROGATE_MESSAGE = 'Request body strings must not contain an unpaired UTF-16 surrogate';

/**
 * U+0000, or a surrogate not part of a pair (the `u` flag reads a pair as one code point, so only
 * lone halves match). PostgreSQL text cannot hold U+0000, and jsonb refuses `\udfff` alone (a 500
 * the OpenAPI fuzzer found on a MED defense); text would store it as U+FFFD, altering the data. The
 * body is refused at the edge instead (I-JSON, RFC 7493 §2.1, forbids both).
 */
const UNSTORABLE = /[\u0000\ud800-\udfff]/u;

function checkStorable(s: string): void {
  if (!UNSTORABLE.test(s)) return;
  throw new JsonContentError(s.includes('\u0000') ? NUL_MESSAGE : SURROGATE_MESSAGE);
}

type Node =
  | { t: 'num'; text: string }
  | { t: 'str'; value: string }
  | { t: 'lit'; text: 'true' | 'false' | 'null' }
  | { t: 'arr'; items: Node[] }
  | { t: 'obj'; entries: Map<string, Node> };

const MAX_DEPTH = 200;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const WS = /[ \t\n\r]*/y;

class Parser {
  pos = 0;
  constructor(readonly text: string) {}

  fail(what: string): never {
    throw new CanonicalJsonError(`${what} at position ${this.pos}`);
  }

  ws() {
    WS.lastIndex = this.pos;
    WS.exec(this.text);
    this.pos = WS.lastIndex;
  }

  value(depth: number): Node {
    if (depth > MAX_DEPTH) this.fail('nesting too deep');
    this.ws();
    const c = this.text[this.pos];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return { t: 'str', value: this.string() };
    for (const lit of ['true', 'false', 'null'] as const) {
      if (this.text.startsWith(lit, this.pos)) {
        this.pos += lit.length;
        return { t: 'lit', text: lit };
      }
    }
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (m) {
      this.pos = NUMBER.lastIndex;
      return { t: 'num', text: m[0] };
    }
    return this.fail('unexpected token');
  }

  object(depth: number): Node {
    this.pos++; // {
    const entries = new Map<string, Node>();
    this.ws();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return { t: 'obj', entries };
    }
    for (;;) {
      this.ws();
      if (this.text[this.pos] !== '"') this.fail('expected a string key');
      const key = this.string();
      this.ws();
      if (this.text[this.pos] !== ':') this.fail("expected ':'");
      this.pos++;
      const v = this.value(depth + 1);
      entries.delete(key); // a repeated key keeps its last value and position
      entries.set(key, v);
      this.ws();
      const c = this.text[this.pos++];
      if (c === '}') return { t: 'obj', entries };
      if (c !== ',') this.fail("expected ',' or '}'");
    }
  }

  array(depth: number): Node {
    this.pos++; // [
    const items: Node[] = [];
    this.ws();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return { t: 'arr', items };
    }
    for (;;) {
      items.push(this.value(depth + 1));
      this.ws();
      const c = this.text[this.pos++];
      if (c === ']') return { t: 'arr', items };
      if (c !== ',') this.fail("expected ',' or ']'");
    }
  }

  string(): string {
    this.pos++; // opening quote
    let out = '';
    let start = this.pos;
    for (;;) {
      const code = this.text.charCodeAt(this.pos);
      if (Number.isNaN(code)) this.fail('unterminated string');
      if (code === 0x22) {
        out += this.text.slice(start, this.pos);
        this.pos++;
        return out;
      }
      if (code < 0x20) this.fail('control character in string');
      if (code === 0x5c) {
        out += this.text.slice(start, this.pos);
        const e = this.text[this.pos + 1];
        this.pos += 2;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            const hex = this.text.slice(this.pos, this.pos + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('bad \\u escape');
            out += String.fromCharCode(parseInt(hex, 16));
            this.pos += 4;
            break;
          }
          default:
            this.fail('bad escape');
        }
        start = this.pos;
        continue;
      }
      this.pos++;
    }
  }
}

function byCodePoint(a: string, b: string): number {
  // Compare by code point: JavaScript's default sort compares UTF-16 code units, which orders
  // characters beyond U+FFFF before U+E000–U+FFFF.
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const cx = x.value.codePointAt(0)!;
    const cy = y.value.codePointAt(0)!;
    if (cx !== cy) return cx - cy;
  }
}

function write(node: Node): string {
  switch (node.t) {
    case 'num':
      return node.text;
    case 'lit':
      return node.text;
    case 'str':
      return JSON.stringify(node.value);
    case 'arr':
      return `[${node.items.map(write).join(',')}]`;
    case 'obj': {
      const keys = [...node.entries.keys()].sort(byCodePoint);
      return `{${keys.map((k) => `${JSON.stringify(k)}:${write(node.entries.get(k)!)}`).join(',')}}`;
    }
  }
}

/**
 * A JSON number whose text is not an integer literal (`100.0`, `1e2`, `1.5`,
 * `99.99999999999999999`). Request bodies carry money as integer cents and "floats and decimals are
 * never sent", so integer-ness is decided from the text the client wrote (and signed), never from
 * the double it would parse to: `100.0` and `1e2` are not the integer 100. Every integer check
 * (`Number.isSafeInteger`, zod's `.int()`, `typeof v === 'number'`) refuses this object; `value`
 * is the nearest double, for messages only. Serializes as that number.
 */
export class JsonDecimal {
  constructor(
    readonly text: string,
    readonly value: number,
  ) {
    Object.freeze(this);
  }
  toJSON(): number {
    return this.value;
  }
  toString(): string {
    return this.text;
  }
}

const INTEGER_LITERAL = /^-?(?:0|[1-9]\d*)$/;

function toValue(node: Node): unknown {
  switch (node.t) {
    case 'num':
      return INTEGER_LITERAL.test(node.text) ? Number(node.text) : new JsonDecimal(node.text, Number(node.text));
    case 'str':
      checkStorable(node.value);
      return node.value;
    case 'lit':
      return node.text === 'null' ? null : node.text === 'true';
    case 'arr':
      return node.items.map(toValue);
    case 'obj': {
      // Null-prototype objects: a key named `__proto__`, `constructor` or `toString` is plain data,
      // never a prototype, and nothing is read through Object.prototype.
      const out = Object.create(null) as Record<string, unknown>;
      for (const [k, v] of node.entries) {
        checkStorable(k);
        out[k] = toValue(v);
      }
      return out;
    }
  }
}

/**
 * Parses a request body: like JSON.parse, but objects have no prototype (keys like `__proto__` are
 * data), numbers that are not integer literals become `JsonDecimal`, nesting is limited to
 * 200 levels, and a repeated key keeps its last value. Throws CanonicalJsonError if the text is
 * not valid JSON, JsonContentError if a string or key holds U+0000 or an unpaired surrogate.
 */
export function parseJson(text: string): unknown {
  const p = new Parser(text);
  const node = p.value(0);
  p.ws();
  if (p.pos !== text.length) p.fail('unexpected data after the JSON value');
  return toValue(node);
}

/** True for a parsed body's object (null prototype) or a plain object literal. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  // Also the objects of Fastify's query-string parser, whose prototype has no prototype.
  return proto === null || proto === Object.prototype || Object.getPrototypeOf(proto) === null;
}

/** The canonical form of a JSON text; throws CanonicalJsonError if it is not valid JSON. */
export function canonicalize(text: string): string {
  const p = new Parser(text);
  const node = p.value(0);
  p.ws();
  if (p.pos !== text.length) p.fail('unexpected data after the JSON value');
  return write(node);
}

/** Canonical form of a JavaScript value (what a client signs): sorted keys, compact, raw UTF-8. */
export function canonicalStringify(value: unknown): string {
  return canonicalize(JSON.stringify(value));
}

/**
 * One parse of a signed request body for both of its uses: the canonical form the signature covers
 * (`canonicalize`) and, on demand, the value (`parseJson`) — the text is read once. Throws
 * CanonicalJsonError if it is not valid JSON; `value()` throws JsonContentError as parseJson does.
 */
export function parseCanonical(text: string): { canonical: string; value(): unknown } {
  const p = new Parser(text);
  const node = p.value(0);
  p.ws();
  if (p.pos !== text.length) p.fail('unexpected data after the JSON value');
  return { canonical: write(node), value: () => toValue(node) };
}
