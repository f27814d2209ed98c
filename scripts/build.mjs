#!/usr/bin/env node
/**
 * npm run build (and npm start, through scripts/ensure-build.mjs, when a source changed): the
 * runtime JavaScript, transpiled by esbuild in about a second — src/ to dist/src/ and the SDK
 * workspace (packages/sdk/src/) to packages/sdk/dist/, one file per source file (no bundle), so
 * every path found from import.meta.url (package.json, migrations/) stays where it was. esbuild does
 * not type check: tsc does, in npm test (`tsc --noEmit -p .`).
 *
 * --types: also the declarations, with tsc (the SDK's own build, then the server's .d.ts); npm
 * pack runs it (prepack). Usage: node scripts/build.mjs [--types]
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('..', import.meta.url));

function tsFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** esbuild, loaded here so that a missing devDependency is one clear line, not a stack trace. */
async function loadEsbuild() {
  try {
    return await import('esbuild');
  } catch {
    process.stderr.write('pixgate: esbuild (a devDependency) is not installed: run `npm ci` (with dev dependencies) to build, or ship a built dist/ (npm pack builds it)\n');
    process.exit(1);
  }
}

/** The runtime build: dist/src/ and packages/sdk/dist/ (JavaScript only), then dist/.build-stamp. */
export async function buildRuntime() {
  const esbuild = await loadEsbuild();
  const sdk = join(root, 'packages', 'sdk');
  rmSync(join(root, 'dist', 'src'), { recursive: true, force: true });
  rmSync(join(sdk, 'dist'), { recursive: true, force: true });
  const common = { bundle: false, format: 'esm', logLevel: 'warning', tsconfig: join(root, 'tsconfig.json') };
  await Promise.all([
    esbuild.build({ ...common, entryPoints: tsFiles(join(root, 'src')), outbase: join(root, 'src'), outdir: join(root, 'dist', 'src'), platform: 'node', target: 'node20', sourcemap: true }),
    // The SDK runs in browsers and edge runtimes too: no Node.js platform assumptions.
    esbuild.build({ ...common, entryPoints: tsFiles(join(sdk, 'src')), outbase: join(sdk, 'src'), outdir: join(sdk, 'dist'), platform: 'neutral', target: 'es2022', tsconfig: join(sdk, 'tsconfig.json') }),
  ]);
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(join(root, 'dist', '.build-stamp'), new Date().toISOString() + '\n');
}

/** Declarations (tsc): the SDK's full build (JavaScript and .d.ts), then the server's .d.ts. */
export function buildTypes() {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'packages', 'sdk', 'tsconfig.json')], { stdio: 'inherit' });
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = performance.now();
  await buildRuntime();
  if (process.argv.includes('--types')) buildTypes();
  process.stderr.write(`pixgate: built in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
