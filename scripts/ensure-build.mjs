#!/usr/bin/env node
// `npm start` (and `npm run pixgate`) run this first: it builds the runtime (esbuild, about a
// second; scripts/build.mjs) only when dist/ is missing or older than a source file, so a start
// without changes checks a few timestamps and goes on. No type checking here (npm test does it).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { buildRuntime, root } from './build.mjs';

const stamp = join(root, 'dist', '.build-stamp');

function newest(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let max = 0;
  for (const name of readdirSync(path)) max = Math.max(max, newest(join(path, name)));
  return max;
}

const sources = Math.max(
  newest(join(root, 'src')),
  newest(join(root, 'packages', 'sdk', 'src')),
  ...['tsconfig.json', 'package.json', 'packages/sdk/package.json', 'scripts/build.mjs'].map((f) => statSync(join(root, f)).mtimeMs),
);
const outputs = ['dist/src/main.js', 'dist/src/cli/main.js', 'packages/sdk/dist/index.js'].every((f) => existsSync(join(root, f)));
const built = existsSync(stamp) && outputs ? statSync(stamp).mtimeMs : 0;
if (built < sources) {
  process.stderr.write(built ? 'pixgate: sources changed since the last build; building…\n' : 'pixgate: first start; building (esbuild)…\n');
  const started = performance.now();
  await buildRuntime();
  process.stderr.write(`pixgate: built in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
