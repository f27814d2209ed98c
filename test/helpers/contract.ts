import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { openApiDocument } from '../../src/openapi/document.js';
import { openApiPath } from '../../src/openapi/document.js';
import { standardPath, standardViolations } from './apiPixContract.js';

/**
 * The contract check of the test server: every exchange the integration tests make with a
 * documented route is checked against the OpenAPI document — the answer's status must be listed for
 * the operation and its body must match that status's schema; a request answered 2xx must match the
 * operation's parameters and body schemas (the server accepted it, so the document must too).
 * Violations are collected here and test/helpers/contract-setup.ts fails the test that caused them.
 */
type Json = Record<string, any>;

const DOC_ID = 'https://pixgate.invalid/openapi.json';
let ajv: Ajv2020 | undefined;
const compiled = new Map<string, ValidateFunction>();
const violations: string[] = [];

function validator(pointer: string): ValidateFunction {
  let v = compiled.get(pointer);
  if (!v) {
    if (!ajv) {
      ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
      ajv.addSchema(openApiDocument() as Json, DOC_ID);
    }
    v = ajv.compile({ $ref: `${DOC_ID}#${pointer}` });
    compiled.set(pointer, v);
  }
  return v;
}

const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function check(what: string, pointer: string, value: unknown): void {
  const v = validator(pointer);
  if (!v(value)) {
    violations.push(`${what}: ${JSON.stringify(v.errors?.slice(0, 5))} in ${JSON.stringify(value)?.slice(0, 600)}`);
  }
}

/** Query or path parameters of an operation as one object schema. */
const paramSchemas = new Map<string, ValidateFunction>();
function paramValidator(key: string, params: Json[], where: 'query' | 'path'): ValidateFunction {
  let v = paramSchemas.get(key);
  if (!v) {
    const ps = params.filter((p) => p.in === where);
    validator('/openapi'); // ensures ajv exists
    v = ajv!.compile({
      type: 'object',
      properties: Object.fromEntries(ps.map((p) => [p.name, p.schema])),
      required: ps.filter((p) => p.required).map((p) => p.name),
    });
    paramSchemas.set(key, v);
  }
  return v;
}

/**
 * Query and path values as OpenAPI reads them (style `form`/`simple`): a parameter declared integer,
 * number or boolean is that value's text. Only exact texts convert (`12`, `-3`, `1.5`, `true`);
 * anything else stays a string and fails the parameter's type.
 */
function deserialize(values: unknown, params: Json[], where: 'query' | 'path'): unknown {
  if (values === null || typeof values !== 'object') return values;
  const types = new Map(params.filter((p) => p.in === where).map((p) => [p.name as string, p.schema?.type as string | undefined]));
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(values as Record<string, unknown>)) {
    const type = types.get(name);
    if (typeof value === 'string' && type === 'integer' && /^-?\d{1,16}$/.test(value)) out[name] = Number(value);
    else if (typeof value === 'string' && type === 'number' && /^-?\d{1,16}(\.\d{1,16})?$/.test(value)) out[name] = Number(value);
    else if (typeof value === 'string' && type === 'boolean' && (value === 'true' || value === 'false')) out[name] = value === 'true';
    else out[name] = value;
  }
  return out;
}

function record(req: FastifyRequest, status: number, contentType: string | undefined, payload: unknown): void {
  const url = req.routeOptions?.url;
  if (!url) return;
  // The API Pix façade answers to the central bank's standard, not to pixgate's document.
  if (standardPath(url) !== undefined) {
    violations.push(...standardViolations(req, status, contentType ?? '', payload));
    return;
  }
  const doc = openApiDocument() as Json;
  const path = openApiPath(url);
  const op = doc.paths?.[path]?.[req.method.toLowerCase()];
  if (!op) return; // not a documented route (test-only plugins, /docs, /openapi.json)
  const where = `${req.method} ${path} → ${status}`;
  const base = `/paths/${esc(path)}/${req.method.toLowerCase()}`;
  const camel = String(req.headers['x-key-case'] ?? '').trim().toLowerCase() === 'camelcase';
  const response = op.responses?.[String(status)];
  if (!response) {
    violations.push(`${where}: status ${status} is not documented (body ${String(typeof payload === 'string' ? payload : '').slice(0, 300)})`);
    return;
  }
  const media = response.content?.['application/json'];
  if (media && !camel) {
    if (typeof payload !== 'string' || !(contentType ?? '').includes('json')) {
      violations.push(`${where}: expected a JSON body, got ${contentType ?? 'none'}`);
    } else {
      let body: unknown;
      try {
        body = JSON.parse(payload);
      } catch {
        violations.push(`${where}: body is not JSON`);
        return;
      }
      check(`${where} response`, `${base}/responses/${status}/content/application~1json/schema`, body);
    }
  } else if (!media && typeof payload === 'string' && payload.length > 0 && (contentType ?? '').includes('json')) {
    violations.push(`${where}: documented without a body, answered ${payload.slice(0, 200)}`);
  }
  if (status >= 200 && status < 300) {
    const params = (op.parameters ?? []) as Json[];
    const key = `${req.method} ${path}`;
    const pv = paramValidator(`${key} path`, params, 'path');
    if (!pv(deserialize(req.params ?? {}, params, 'path'))) violations.push(`${where} request path parameters: ${JSON.stringify(pv.errors)} in ${JSON.stringify(req.params)}`);
    if (!camel) {
      const qv = paramValidator(`${key} query`, params, 'query');
      if (!qv(deserialize(req.query ?? {}, params, 'query'))) violations.push(`${where} request query: ${JSON.stringify(qv.errors)} in ${JSON.stringify(req.query)}`);
    }
    if (op.requestBody && req.body !== undefined && req.body !== null) {
      check(`${where} request body`, `${base}/requestBody/content/application~1json/schema`, req.body);
    } else if (op.requestBody?.required && (req.body === undefined || req.body === null)) {
      violations.push(`${where}: the document requires a body, the server accepted none`);
    }
  }
}

/** Installs the check on a Fastify root instance (before its routes are registered). */
export function installContractCheck(app: FastifyInstance): void {
  app.addHook('onSend', async (req, reply, payload) => {
    try {
      record(req, reply.statusCode, String(reply.getHeader('content-type') ?? ''), payload);
    } catch (err) {
      violations.push(`contract check crashed on ${req.method} ${req.url}: ${(err as Error).stack}`);
    }
    return payload;
  });
}

/** The violations recorded since the last call. */
export function takeContractViolations(): string[] {
  return violations.splice(0, violations.length);
}
