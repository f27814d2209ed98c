#!/usr/bin/env node
// `npm start` (and `npm run pixgate`) run this first: it compiles TypeScript only when dist/ is
// missing or older than a source file, so a start without changes takes about a second.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const stamp = join(root, 'dist', '.build-stamp');

function newest(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let max = 0;
  for (const name of readdirSync(path)) max = Math.max(max, newest(join(path, name)));
  return max;
}

const sources = Math.max(newest(join(root, 'src')), ...['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((f) => statSync(join(root, f)).mtimeMs));
const built = existsSync(stamp) && existsSync(join(root, 'dist', 'src', 'main.js')) ? statSync(stamp).mtimeMs : 0;
if (built < sources) {
  process.stderr.write(built ? 'pixgate: sources changed since the last build; compiling…\n' : 'pixgate: first start; compiling TypeScript once…\n');
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  writeFileSync(stamp, new Date().toISOString() + '\n');
}
