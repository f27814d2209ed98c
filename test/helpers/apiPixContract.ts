import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyRequest } from 'fastify';
import { apiPixStandard } from './apiPixStandard.js';

/**
 * The contract check of the API Pix façade: every exchange a test makes under /api/pix/v2 (and with
 * the payload-location read) is checked against the operation of the central bank's standard
 * itself (test/helpers/apiPixStandard.ts), as test/helpers/contract.ts checks pixgate's own API
 * against pixgate's document: the status must be one the operation lists and the body must match
 * its schema; a request answered 2xx must match the operation's parameters and body.
 *
 * Tolerances, each one a known gap of the standard's document (docs/api-pix.md, "Deviations"):
 *  - patterns written as JavaScript literals (`/^\d{11}$/`) are read without their slashes;
 *  - the lists' items require `idCob`, a property the standard defines nowhere: not required;
 *  - `DadosRecebedor` requires `logradouro`, `cidade`, `uf`, `cep` on the charge object itself, beside
 *    `recebedor` (whose own schema requires them): read as the requirement of `recebedor` only;
 *  - the fixed-date branch of `CobVValor.desconto`'s `oneOf` requires nothing, so a discount of
 *    modality 3–6 (`valorPerc`) matches both branches and no such discount could be valid: that
 *    branch requires its `descontoDataFixa`;
 *  - 401 is not listed by any operation (authentication belongs to OAuth2): allowed with a body
 *    that is a problem (the `Problema` schema);
 *  - 400 is named by the standard's text for the reads (`CobConsultaInvalida`: a list's query, a
 *    revision that does not exist) but not listed in their responses: allowed there with a
 *    `Problema` body;
 *  - `PixConsultados` (GET /pix) requires `cobs`, a copy of `CobsConsultadas`' list name, beside its
 *    own `pix` list: `pix` is required instead;
 *  - `WebhookCompleto` (GET /webhook/{chave}, GET /webhook) requires a `cnpj` described as "the
 *    debtor's CNPJ filter" and has no `chave`, while its example and the changelog (2.1.0-rc.5,
 *    #120, #249) identify a webhook by `chave`: `chave` is required instead of `cnpj`;
 *  - the txid of a received Pix (`Pix`, `ParametrosConsultaPix`, GET /pix's `txid`) is
 *    `allOf: [TxId ({26,35}), {1,35}]`, which still demands 26: the changelog (#269) corrected it
 *    to `{1,35}` for static BR Codes, so `{1,35}` alone is checked there.
 */
type Json = Record<string, any>;
const DOC_ID = 'https://pixgate.invalid/api-pix-standard.json';

let ajv: Ajv | undefined;
let fixed: Json | undefined;
const compiled = new Map<string, ValidateFunction>();

/** The standard's schemas with JavaScript-literal patterns read as the regular expressions they mean. */
function fixPatterns(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(fixPatterns);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === 'pattern' && typeof v === 'string' && /^\/.*\/$/.test(v)) out[k] = v.slice(1, -1);
    else if (k === 'required' && Array.isArray(v)) out[k] = v.filter((name) => name !== 'idCob');
    else out[k] = fixPatterns(v);
  }
  return out;
}

/** The two gaps of the cobv schemas (see the tolerances above). */
function fixKnownGaps(d: Json): void {
  const schemas = d.components?.schemas ?? {};
  if (schemas.DadosRecebedor) delete schemas.DadosRecebedor.required;
  const branches = schemas.CobVValor?.properties?.desconto?.oneOf;
  if (Array.isArray(branches) && branches[0] && branches[0].required === undefined) branches[0].required = ['descontoDataFixa'];
}

/** The document's evident slips in the schemas of answers (listed in the header), corrected. */
function fixDefects(d: Json): Json {
  const schemas = d.components?.schemas as Json | undefined;
  const requireInstead = (name: string, wrong: string, right: string) => {
    const s = schemas?.[name];
    if (s && Array.isArray(s.required) && s.required.includes(wrong)) s.required = s.required.map((r: string) => (r === wrong ? right : r));
  };
  requireInstead('PixConsultados', 'cobs', 'pix');
  requireInstead('WebhookCompleto', 'cnpj', 'chave');
  const widenTxid = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(widenTxid);
    if (node === null || typeof node !== 'object') return node;
    const n = node as Json;
    const all = n.allOf as Json[] | undefined;
    if (Array.isArray(all) && all.length === 2 && all[0]?.$ref === '#/components/schemas/TxId' && all[1]?.pattern === '[a-zA-Z0-9]{1,35}') {
      return { type: 'string', pattern: '^[a-zA-Z0-9]{1,35}$' };
    }
    return Object.fromEntries(Object.entries(n).map(([k, v]) => [k, widenTxid(v)]));
  };
  d.components.schemas = widenTxid(schemas) as Json;
  d.paths = widenTxid(d.paths) as Json;
  return d;
}

function doc(): Json | undefined {
  const standard = apiPixStandard();
  if (!standard) return undefined;
  if (!ajv) {
    fixed = fixDefects(fixPatterns(standard.doc) as Json);
    fixKnownGaps(fixed);
    ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    ajv.addSchema(fixed, DOC_ID);
  }
  return fixed;
}

/** A schema taken out of the document, its local `$ref`s made absolute (to compile on its own). */
function absolutize(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(absolutize);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#') ? `${DOC_ID}${v}` : absolutize(v);
  return out;
}

function validator(pointer: string): ValidateFunction {
  let v = compiled.get(pointer);
  if (!v) {
    v = ajv!.compile({ $ref: `${DOC_ID}#${pointer}` });
    compiled.set(pointer, v);
  }
  return v;
}

/**
 * Violations of a body against a schema of the standard named by its JSON pointer (the callback
 * body `/components/requestBodies/WebhookPixBody/content/application~1json/schema`, which no route
 * of the façade answers with); undefined when the standard is not available.
 */
export function schemaViolations(pointer: string, body: unknown): string[] | undefined {
  if (!doc()) return undefined;
  const v = validator(pointer);
  return v(body) ? [] : (v.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''} (${e.schemaPath})`);
}

const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** A local `$ref` followed to what it names (parameters, responses, request bodies). */
function deref(d: Json, node: Json | undefined): Json | undefined {
  let n = node;
  for (let i = 0; i < 10 && n && typeof n.$ref === 'string'; i++) {
    n = (n.$ref as string)
      .slice(2)
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<any>((o, p) => o?.[p], d);
  }
  return n;
}

/** The standard's path of a façade route: `/api/pix/v2/cob/:txid` → `/cob/{txid}`. */
export function standardPath(routeUrl: string): string | undefined {
  if (routeUrl === PAYLOAD_ROUTE) return '/{pixUrlAccessToken}';
  if (routeUrl === COBV_PAYLOAD_ROUTE) return '/cobv/{pixUrlAccessToken}';
  if (!routeUrl.startsWith('/api/pix/v2/')) return undefined;
  return routeUrl.slice('/api/pix/v2'.length).replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** The Fastify route of the payload-location read (the standard's `GET /{pixUrlAccessToken}`). */
export const PAYLOAD_ROUTE = '/qr/v2/:pixUrlAccessToken';
/** The route of a cobv's payload read (the standard's `GET /cobv/{pixUrlAccessToken}`). */
export const COBV_PAYLOAD_ROUTE = '/qr/v2/cobv/:pixUrlAccessToken';

function problemCheck(out: string[], where: string, payload: unknown): void {
  const body = parseJson(payload);
  if (body === undefined) {
    out.push(`${where}: the body is not JSON`);
    return;
  }
  const v = validator('/components/schemas/Problema');
  if (!v(body)) out.push(`${where}: not a Problema: ${JSON.stringify(v.errors?.slice(0, 5))} in ${JSON.stringify(body).slice(0, 400)}`);
}

function parseJson(payload: unknown): unknown {
  if (typeof payload !== 'string') return undefined;
  try {
    return JSON.parse(payload);
  } catch {
    return undefined;
  }
}

/** The JSON payload of a compact JWS (`header.payload.signature`), undefined if it is not one. */
function jwsPayload(payload: unknown): unknown {
  if (typeof payload !== 'string') return undefined;
  const parts = payload.split('.');
  if (parts.length !== 3) return undefined;
  try {
    return JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

function deserialize(values: unknown, params: Json[]): unknown {
  if (values === null || typeof values !== 'object') return values;
  const d = doc()!;
  const types = new Map(params.map((p) => [p.name as string, deref(d, p.schema)?.type as string | undefined]));
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(values as Record<string, unknown>)) {
    const type = types.get(name);
    if (typeof value === 'string' && type === 'integer' && /^-?\d{1,16}$/.test(value)) out[name] = Number(value);
    else if (typeof value === 'string' && type === 'boolean' && (value === 'true' || value === 'false')) out[name] = value === 'true';
    else out[name] = value;
  }
  return out;
}

/**
 * The violations of one exchange against the standard (empty when it conforms, or when the route
 * is not the façade's, or the standard is not available).
 */
export function standardViolations(req: FastifyRequest, status: number, contentType: string, payload: unknown): string[] {
  const url = req.routeOptions?.url;
  const path = url ? standardPath(url) : undefined;
  if (!path) return [];
  const d = doc();
  if (!d) return [];
  // HEAD is GET without a body (RFC 9110 §9.3.2), which Fastify serves for every GET route: it
  // is held to the GET operation's statuses, and has no body to check.
  const head = req.method === 'HEAD';
  const method = head ? 'get' : req.method.toLowerCase();
  const item = d.paths?.[path];
  const op = item?.[method];
  const where = `API Pix ${req.method} ${path} → ${status}`;
  if (!op) return [`${where}: the standard has no such operation`];
  const out: string[] = [];
  const response = deref(d, op.responses?.[String(status)]);
  const base = `/paths/${esc(path)}/${method}`;
  if (!response) {
    const tolerated = status === 401 || (status === 400 && method === 'get');
    if (tolerated) problemCheck(out, where, payload);
    else out.push(`${where}: status ${status} is not listed by the standard (body ${String(payload).slice(0, 300)})`);
    return out;
  }
  if (head) return out;
  const content = (response.content ?? {}) as Json;
  const media = Object.keys(content);
  if (media.length > 0) {
    const name = media.find((m) => contentType.startsWith(m)) ?? media[0]!;
    const body = name === 'application/jose' ? jwsPayload(payload) : parseJson(payload);
    if (body === undefined) out.push(`${where}: expected ${name}, got ${contentType || 'nothing'}: ${String(payload).slice(0, 200)}`);
    else {
      const pointer = op.responses[String(status)].$ref
        ? `${String(op.responses[String(status)].$ref).slice(1)}/content/${esc(name)}/schema`
        : `${base}/responses/${status}/content/${esc(name)}/schema`;
      const v = validator(pointer);
      if (!v(body)) out.push(`${where} response: ${JSON.stringify(v.errors?.slice(0, 5))} in ${JSON.stringify(body).slice(0, 600)}`);
    }
  }
  if (status >= 200 && status < 300) {
    const params = [...((item.parameters ?? []) as Json[]), ...((op.parameters ?? []) as Json[])].map((p) => deref(d, p)!);
    for (const where2 of ['path', 'query'] as const) {
      const ps = params.filter((p) => p.in === where2);
      const values = where2 === 'path' ? req.params : req.query;
      const schema = { type: 'object', properties: Object.fromEntries(ps.map((p) => [p.name, p.schema])), required: ps.filter((p) => p.required).map((p) => p.name) };
      const key = `${base} ${where2}`;
      let v = compiled.get(key);
      if (!v) {
        v = ajv!.compile(absolutize(schema) as Json);
        compiled.set(key, v);
      }
      if (!v(deserialize(values ?? {}, ps))) out.push(`${where} request ${where2}: ${JSON.stringify(v.errors)} in ${JSON.stringify(values)}`);
    }
    const requestBody = deref(d, op.requestBody);
    if (requestBody && req.body !== undefined && req.body !== null) {
      const pointer = op.requestBody.$ref ? `${String(op.requestBody.$ref).slice(1)}/content/application~1json/schema` : `${base}/requestBody/content/application~1json/schema`;
      const v = validator(pointer);
      if (!v(JSON.parse(JSON.stringify(req.body)))) out.push(`${where} request body: ${JSON.stringify(v.errors?.slice(0, 5))} in ${JSON.stringify(req.body).slice(0, 600)}`);
    }
  }
  return out;
}

/**
 * The standard's document as the fuzzer reads it (bench/openapi-fuzz/fuzz_standard.py): the
 * tolerances above applied, and only the operations of `paths` (the ones pixgate serves).
 */
export function standardForFuzz(paths: readonly string[]): Json | undefined {
  const d = doc();
  if (!d) return undefined;
  const copy = JSON.parse(JSON.stringify(d)) as Json;
  copy.paths = Object.fromEntries(Object.entries(copy.paths as Json).filter(([p]) => paths.includes(p)));
  return copy;
}
