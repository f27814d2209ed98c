/**
 * Issue 28: importing the server package's root starts nothing. A child process in an empty folder
 * imports `pixgate` (through node_modules, as an application that installed it would): it prints
 * nothing, creates no ./data, holds no socket or timer (it exits by itself) and gets the
 * programmatic API; that API then starts a server on demand and stops it. The `files` field keeps
 * tests, benchmarks and sources out of the package.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/lib/paths.js';

const exec = promisify(execFile);
const app = mkdtempSync(join(tmpdir(), 'pixgate-root-import-'));

beforeAll(() => {
  if (!existsSync(join(packageRoot, 'dist', 'src', 'index.js'))) throw new Error('dist/src/index.js is missing: run npm run build (npm test does)');
  mkdirSync(join(app, 'node_modules'));
  symlinkSync(packageRoot, join(app, 'node_modules', 'pixgate'), 'dir');
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
});
afterAll(() => rmSync(app, { recursive: true, force: true }));

/** Runs a module in the app folder with a bare environment (local mode defaults: ./data, port 8080). */
function run(file: string, code: string) {
  writeFileSync(join(app, file), code);
  return exec(process.execPath, [file], { cwd: app, env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 });
}

describe("the package root (import 'pixgate')", () => {
  it('starts nothing: no output, no ./data, no socket or timer left (the process exits by itself), only the API', async () => {
    const { stdout, stderr } = await run(
      'import-only.mjs',
      `const m = await import('pixgate');
await new Promise((r) => setTimeout(r, 500));
const handles = process.getActiveResourcesInfo().filter((h) => h !== 'TTYWrap' && h !== 'PipeWrap'); // its own stdio
process.stdout.write('RESULT ' + JSON.stringify({ exports: Object.keys(m).sort(), handles }) + '\\n');
`,
    );
    expect(stderr).toBe('');
    const lines = stdout.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1); // nothing printed but the script's own line
    const result = JSON.parse(lines[0]!.replace(/^RESULT /, '')) as { exports: string[]; handles: string[] };
    expect(result.exports).toEqual(['ConfigError', 'createServer']);
    expect(result.handles).toEqual([]);
    expect(readdirSync(app).sort()).toEqual(['import-only.mjs', 'node_modules', 'package.json']);
  });

  it('createServer() starts a server only on start(), answers /healthz, and stop() ends it', async () => {
    const { stdout } = await run(
      'embed.mjs',
      `import { createServer } from 'pixgate';
const server = createServer({ env: { APP_ENV: 'local', DATA_DIR: 'memory://', PORT: '0', LOG_LEVEL: 'silent' }, print: () => {} });
const { url, demo } = await server.start();
const health = await fetch(url + '/healthz');
await server.stop();
process.stdout.write(JSON.stringify({ status: health.status, seeded: demo !== null }));
`,
    );
    expect(JSON.parse(stdout)).toEqual({ status: 200, seeded: true });
  });

  it('ships the built runtime, migrations and docs; no tests, benchmarks, scripts or TypeScript sources', async () => {
    const { stdout } = await exec('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: packageRoot, maxBuffer: 1 << 24 });
    const paths = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'dist/src/index.js', 'dist/src/main.js', 'dist/src/cli/main.js', 'migrations/0001_foundation.sql']));
    const unexpected = paths.filter((p) => !/^(dist\/src\/.+\.(js|d\.ts)|migrations\/[^/]+\.sql|docs\/[^/]+\.md|package\.json|README\.md|LICENSE)$/.test(p));
    expect(unexpected).toEqual([]);
  });
});
