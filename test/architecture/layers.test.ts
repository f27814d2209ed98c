/**
 * The dependency rule of docs/architecture.md, read from the code's own imports (type imports
 * included): layers only point down, no import circle, no hand-written source file over 450 lines.
 * A failure names the file, the import and the rule it breaks.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(__dirname, '../..');

/** The layers from the top down; a file may import its own layer or any layer below it. */
export const LAYERS = ['entry', 'edge', 'domain', 'ledger-rail', 'platform'] as const;
type Layer = (typeof LAYERS)[number] | 'cli';

const EDGE_FOLDERS = ['api', 'http', 'external', 'portal', 'console', 'admin', 'sandbox', 'openapi'];
// auth holds API keys and central keys, owned by merchants: a domain (its primitives — HMAC,
// secrets, IP lists, nonces — import nothing above the platform either way).
const DOMAIN_FOLDERS = ['auth', 'pix', 'tef', 'med', 'boleto', 'merchants', 'transactions', 'webhooks', 'events', 'retention', 'idempotency', 'apiPix'];
const LEDGER_RAIL_FOLDERS = ['ledger', 'rail'];
const PLATFORM_FOLDERS = ['db', 'lib', 'ratelimit', 'metrics', 'errors'];

/** The layer of a file under src/ (path relative to src/, with forward slashes). */
export function layerOf(path: string): Layer {
  const [top] = path.split('/');
  const name = path.slice(path.lastIndexOf('/') + 1);
  if (['main.ts', 'index.ts', 'sdk.ts', 'server.ts', 'app.ts', 'seed.ts', 'localCredentials.ts'].includes(path)) return 'entry';
  if (top === 'cli') return 'cli';
  if (path === 'context.ts' || path === 'health.ts' || EDGE_FOLDERS.includes(top!)) return 'edge';
  if (DOMAIN_FOLDERS.includes(top!)) return 'domain';
  if (LEDGER_RAIL_FOLDERS.includes(top!)) return 'ledger-rail';
  if (path === 'config.ts' || path === 'logger.ts' || PLATFORM_FOLDERS.includes(top!)) return 'platform';
  throw new Error(`src/${path} is in no layer: add its folder to test/architecture/layers.test.ts and docs/architecture.md`);
}

function mayImport(from: Layer, to: Layer): boolean {
  // The CLI calls the API through the SDK and signs local test deliveries with the webhook
  // module's own code: it may use the domain and below, never the server's edge or entry.
  if (from === 'cli') return to === 'cli' || to === 'domain' || to === 'ledger-rail' || to === 'platform';
  if (to === 'cli') return false;
  return LAYERS.indexOf(to as (typeof LAYERS)[number]) >= LAYERS.indexOf(from as (typeof LAYERS)[number]);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|mjs|py)$/.test(entry) && !entry.endsWith('.d.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/g;

/** Every relative import of a TypeScript file, resolved to a path relative to src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith('.')) continue;
    const target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
    out.push(relative(join(ROOT, 'src'), target).split('\\').join('/'));
  }
  return out;
}

const srcFiles = sourceFiles(join(ROOT, 'src')).filter((f) => f.endsWith('.ts'));
const graph = new Map(srcFiles.map((f) => [relative(join(ROOT, 'src'), f).split('\\').join('/'), importsOf(f)]));

describe('the dependency rule (docs/architecture.md)', () => {
  it('places every source file in a layer', () => {
    for (const path of graph.keys()) expect(() => layerOf(path)).not.toThrow();
  });

  it('keeps route declarations and route files in the edge (src/api/<domain>/), not in the domain folders', () => {
    const misplaced = [...graph.keys()].filter((path) => /(^|\/)(routes\.ts|[^/]+\.routes\.ts|[^/]+\.api\.ts)$/.test(path) && ['domain', 'ledger-rail', 'platform'].includes(layerOf(path)));
    expect(misplaced).toEqual([]);
  });

  it('has no import that points up a layer', () => {
    const violations: string[] = [];
    for (const [from, targets] of graph) {
      for (const to of targets) {
        if (!graph.has(to)) continue; // outside src/ (tests do not import into src's graph)
        if (!mayImport(layerOf(from), layerOf(to))) violations.push(`src/${from} (${layerOf(from)}) imports src/${to} (${layerOf(to)})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('has no import circle', () => {
    // Tarjan's strongly connected components over the file graph.
    let index = 0;
    const indexOf = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const circles: string[][] = [];
    const visit = (v: string) => {
      indexOf.set(v, index);
      low.set(v, index++);
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!indexOf.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indexOf.get(w)!));
      }
      if (low.get(v) === indexOf.get(v)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== v);
        if (component.length > 1) circles.push(component.sort());
      }
    };
    for (const v of graph.keys()) if (!indexOf.has(v)) visit(v);
    expect(circles).toEqual([]);
  });

  it('keeps every hand-written source file within 450 lines', () => {
    const files = [...sourceFiles(join(ROOT, 'src')), ...sourceFiles(join(ROOT, 'packages', 'sdk', 'src')), ...sourceFiles(join(ROOT, 'bench')), ...sourceFiles(join(ROOT, 'scripts'))];
    const long = files
      .filter((f) => !/^\/\/ Generated by /.test(readFileSync(f, 'utf8')))
      .map((f) => ({ file: relative(ROOT, f), lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > 450)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });

  it('classifies by the documented rule', () => {
    expect(layerOf('api/pix/cashOut.routes.ts')).toBe('edge');
    expect(layerOf('api/pix/pix.api.ts')).toBe('edge');
    expect(layerOf('pix/cashOut.routes.ts')).toBe('domain'); // and refused by the test above
    expect(layerOf('pix/refund.ts')).toBe('domain');
    expect(layerOf('context.ts')).toBe('edge');
    expect(layerOf('rail/rail.ts')).toBe('ledger-rail');
    expect(layerOf('errors/catalog.ts')).toBe('platform');
    expect(mayImport('domain', 'edge')).toBe(false);
    expect(mayImport('edge', 'domain')).toBe(true);
    expect(mayImport('platform', 'ledger-rail')).toBe(false);
    expect(mayImport('cli', 'edge')).toBe(false);
    expect(layerOf('index.ts')).toBe('entry');
  });
});

describe('the SDK package (packages/sdk)', () => {
  const sdkSrc = join(ROOT, 'packages', 'sdk', 'src');
  it('imports only its own files: no package, no node: module, nothing of the server', () => {
    const outside: string[] = [];
    for (const file of sourceFiles(sdkSrc)) {
      for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
        const spec = m[1] ?? m[2]!;
        const target = resolve(dirname(file), spec);
        if (!spec.startsWith('.') || !target.startsWith(sdkSrc)) outside.push(`${relative(ROOT, file)} imports ${spec}`);
      }
    }
    expect(outside).toEqual([]);
  });

  it('declares no dependency', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'packages', 'sdk', 'package.json'), 'utf8')) as Record<string, unknown>;
    expect([pkg.dependencies, pkg.peerDependencies, pkg.optionalDependencies].filter(Boolean)).toEqual([]);
  });
});
