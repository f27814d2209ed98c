import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/lib/paths.js';
import { openApiDocument } from '../../src/openapi/document.js';
import { SCHEMAS_FILE, sdkSchemasSource } from '../../scripts/gen-sdk-types.js';

/**
 * Issue 13: the SDK's answer types are generated from the OpenAPI document (packages/sdk/src/schemas.ts,
 * itself generated from the schemas the server validates with); its input types are written for
 * readers (doc comments on cents and aliases). Both are checked against the document:
 *   - every field an SDK type declares exists in the document's schema (no invented or stale field);
 *   - an input type declares every field of the request schema (nothing the API takes is missing);
 *   - an answer type declares every field the answer schema requires.
 */
type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  allOf?: Schema[];
  anyOf?: Schema[];
  oneOf?: Schema[];
};
const doc = openApiDocument() as unknown as {
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, { content?: Record<string, { schema: Schema }> }> }>>;
  components: { schemas: Record<string, Schema> };
};

const resolve = (s: Schema): Schema => (s.$ref ? resolve(doc.components.schemas[s.$ref.replace('#/components/schemas/', '')]!) : s);

/** Property names and required names of an object schema, through allOf/anyOf/oneOf (union of properties; required only where every branch requires). */
function fieldsOf(schema: Schema): { properties: Set<string>; required: Set<string> } {
  const s = resolve(schema);
  const properties = new Set(Object.keys(s.properties ?? {}));
  let required = new Set(s.required ?? []);
  for (const part of s.allOf ?? []) {
    const f = fieldsOf(part);
    f.properties.forEach((p) => properties.add(p));
    f.required.forEach((p) => required.add(p));
  }
  const branches = [...(s.anyOf ?? []), ...(s.oneOf ?? [])].map(resolve).filter((b) => b.type !== 'null');
  if (branches.length > 0) {
    const fs = branches.map(fieldsOf);
    fs.forEach((f) => f.properties.forEach((p) => properties.add(p)));
    const common = [...fs[0]!.required].filter((r) => fs.every((f) => f.required.has(r)));
    required = new Set([...required, ...common]);
  }
  return { properties, required };
}

function operation(method: string, path: string) {
  const op = doc.paths[`/api/external${path}`]?.[method];
  if (!op) throw new Error(`${method} ${path} is not in the document`);
  return op;
}
const request = (method: string, path: string) => operation(method, path).requestBody!.content['application/json']!.schema;
function answer(method: string, path: string, ...pointer: string[]): Schema {
  const op = operation(method, path);
  const status = Object.keys(op.responses).find((s) => s.startsWith('2'))!;
  let s = resolve(op.responses[status]!.content!['application/json']!.schema);
  for (const step of pointer) s = resolve(step === '[]' ? s.items! : s.properties![step]!);
  return s;
}

/** Declared property names of an interface of packages/sdk/src/types.ts, its `extends` included (index signatures excluded). */
const program = ts.createProgram([join(packageRoot, 'packages', 'sdk', 'src', 'types.ts')], { strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext });
const checker = program.getTypeChecker();
const source = program.getSourceFile(join(packageRoot, 'packages', 'sdk', 'src', 'types.ts'))!;
function sdkFields(name: string): Set<string> {
  let found: ts.Type | undefined;
  ts.forEachChild(source, (node) => {
    if ((ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) && node.name.text === name) found = checker.getTypeAtLocation(node.name);
  });
  if (!found) throw new Error(`packages/sdk/src/types.ts has no type ${name}`);
  return new Set(checker.getPropertiesOfType(found).map((p) => p.name));
}

const ANSWERS: [sdkType: string, method: string, path: string, pointer: string[]][] = [
  ['Balance', 'get', '/balance', []],
  ['CashOutResult', 'post', '/pix/cash-out', []],
  ['TefResult', 'post', '/tef/transfers', []],
  ['RefundResult', 'post', '/pix/refund', []],
  ['Charge', 'post', '/pix/cash-in', []],
  ['StatementItem', 'get', '/statement', ['data', '[]']],
  ['Receipt', 'get', '/transactions/{id}/receipt', []],
  ['Infraction', 'get', '/med/{id}', []],
  ['Webhook', 'get', '/webhooks', ['[]']],
  ['CpfValidation', 'post', '/cpf/validate', []],
  ['PixKeyList', 'get', '/pix/keys', []],
  ['PixKey', 'get', '/pix/keys', ['data', '[]']],
  ['FeedPage', 'get', '/events', []],
  ['FeedEvent', 'get', '/events', ['events', '[]']],
];

const INPUTS: [sdkType: string, method: string, path: string][] = [
  ['CashOutInput', 'post', '/pix/cash-out'],
  ['TefInput', 'post', '/tef/transfers'],
  ['RefundInput', 'post', '/pix/refund'],
  ['ChargeInput', 'post', '/pix/cash-in'],
  ['DefenseInput', 'post', '/med/{id}/defense'],
  ['WebhookInput', 'post', '/webhooks'],
];

describe('SDK types against the OpenAPI document', () => {
  it('packages/sdk/src/schemas.ts is what the generator writes from the current document (run npm run gen:sdk-types)', () => {
    expect(readFileSync(SCHEMAS_FILE, 'utf8')).toBe(sdkSchemasSource());
  });

  it.each(ANSWERS)('%s declares only fields of %s %s and every required one', (name, method, path, pointer) => {
    const schema = fieldsOf(answer(method, path, ...pointer));
    const sdk = sdkFields(name);
    expect([...sdk].filter((f) => !schema.properties.has(f)), `fields of ${name} the document does not have`).toEqual([]);
    expect([...schema.required].filter((f) => !sdk.has(f)), `required fields missing from ${name}`).toEqual([]);
  });

  it.each(INPUTS)('%s declares exactly the fields of the %s %s request', (name, method, path) => {
    const schema = fieldsOf(request(method, path));
    const sdk = sdkFields(name);
    expect([...sdk].filter((f) => !schema.properties.has(f)), `fields of ${name} the API refuses`).toEqual([]);
    expect([...schema.properties].filter((f) => !sdk.has(f)), `request fields missing from ${name}`).toEqual([]);
  });
});
