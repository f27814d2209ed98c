import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';

/**
 * The central bank's "API Pix" standard (openapi.yaml, v2.9.0), read at run time and never kept in
 * this repository: from the file named by PIX_API_STANDARD, or else from a git mirror of the
 * public repository bacen/pix-api (PIX_API_STANDARD_GIT_DIR, default the workplace's mirror) with
 * `git show HEAD:openapi.yaml`. Undefined when neither is there: the tests that need it skip
 * (`describe.skipIf(!apiPixStandard())`, reason in API_PIX_STANDARD_MISSING).
 */
export const API_PIX_STANDARD_MISSING =
  'the API Pix standard (bacen/pix-api openapi.yaml) is not available: set PIX_API_STANDARD=/path/to/openapi.yaml or PIX_API_STANDARD_GIT_DIR to a git mirror of bacen/pix-api';

const DEFAULT_GIT_DIR = '/work/.mirror/bacen+pix-api/repo';

export interface ApiPixStandard {
  /** The parsed document (OpenAPI 3.0). */
  doc: Record<string, any>;
  /** Where it was read from. */
  source: string;
  version: string;
}

let loaded: ApiPixStandard | null | undefined;

function readText(): { text: string; source: string } | undefined {
  const file = process.env.PIX_API_STANDARD;
  if (file) return existsSync(file) ? { text: readFileSync(file, 'utf8'), source: file } : undefined;
  const gitDir = process.env.PIX_API_STANDARD_GIT_DIR ?? DEFAULT_GIT_DIR;
  if (!existsSync(gitDir)) return undefined;
  try {
    const text = execFileSync('git', ['--git-dir', gitDir, 'show', 'HEAD:openapi.yaml'], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] });
    return { text, source: `${gitDir} HEAD:openapi.yaml` };
  } catch {
    return undefined;
  }
}

export function apiPixStandard(): ApiPixStandard | undefined {
  if (loaded !== undefined) return loaded ?? undefined;
  const read = readText();
  if (!read) {
    loaded = null;
    return undefined;
  }
  const doc = parse(read.text, { maxAliasCount: -1 }) as Record<string, any>;
  loaded = { doc, source: read.source, version: String(doc.info?.version ?? '') };
  return loaded;
}
