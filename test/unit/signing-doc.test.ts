import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { signV1, signV2, v2SigningString } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { packageRoot } from '../../src/lib/paths.js';

const doc = readFileSync(join(packageRoot, 'docs', 'signing.md'), 'utf8');
function example(name: string): string {
  const m = new RegExp(`<!-- example:${name} -->\\n\`\`\`text\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
  if (!m) throw new Error(`example ${name} not found in docs/signing.md`);
  return m[1]!;
}

describe('docs/signing.md worked example', () => {
  const secret = example('secret');
  const canonical = canonicalize(example('body'));
  const parts = {
    timestamp: '1795000000',
    nonce: '4f1c2a9e8b7d6c5e4f3a2b1c',
    method: 'POST',
    path: '/api/external/pix/cash-out',
    idempotencyKey: 'order-42-payout',
    canonicalBody: canonical,
  };

  it('canonical body', () => expect(canonical).toBe(example('canonical')));
  it('v1 signature', () => expect(signV1(secret, canonical)).toBe(example('v1')));
  it('v2 signed string', () => expect(v2SigningString(parts)).toBe(example('v2-string')));
  it('v2 signature', () => expect(signV2(secret, parts)).toBe(example('v2')));
});
