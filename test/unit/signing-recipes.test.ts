import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { signV1 } from '../../src/auth/hmac.js';
import { canonicalize } from '../../src/lib/canonicalJson.js';
import { packageRoot } from '../../src/lib/paths.js';
import { jsonObject, variantText } from '../helpers/jsonVariants.js';

/**
 * Issue 11, signing documentation: the Node and Python recipes of docs/signing.md, run as written
 * (by `node` and `python3`) over a few hundred generated body texts, must produce the server's
 * canonical body and v1 signature for every one — numbers in every JSON spelling, keys needing
 * code-point order, escapes, repeated keys, lone surrogates, whitespace.
 */
const doc = readFileSync(join(packageRoot, 'docs', 'signing.md'), 'utf8');
function recipe(name: string, lang: string): string {
  const m = new RegExp(`<!-- recipe:${name} -->\\n\`\`\`${lang}\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
  if (!m) throw new Error(`recipe ${name} not found in docs/signing.md`);
  return m[1]!;
}

const SECRET = 'sk_test_recipes_0123456789abcdef';
const NUMBER_SPELLINGS = ['0', '-0', '1', '100', '100.0', '10.50', '1e2', '1E2', '1e+2', '1E-2', '-1.5e-7', '1e21', '1e400', '99.99999999999999999', '12345678901234567890', '0.1', '5e-324'];

function bodies(): string[] {
  const fixed = [
    '{"amount":1e2}', '{"amount":10.50}', '{"amount":-0}', '{"amount":1e21}', '{"amount":10.0}', '{"\\uff21":1,"😀":2}',
    '{"😀":1,"\uff21":2,"a":3,"\u00e9":4}', '{"a":1,"a":2}', '{"a":"\\ud800"}', '{"a":"\\ud83d\\ude00"}', '{"b":[1,{"d":2,"c":3}],"a":"x: y, z"}',
    ' { "a" : [ ] , "b" : { } } ', '[3,2,{"z":1,"y":2}]', '"just a string"', '1e2', 'null', '{"\\u0041":"\\u00e9\\/\\t\\u001f\\u007f\\u2028"}',
  ];
  const numbered = fc.sample(
    fc.tuple(jsonObject, fc.array(fc.tuple(fc.string({ unit: 'grapheme', maxLength: 4 }), fc.constantFrom(...NUMBER_SPELLINGS)), { minLength: 1, maxLength: 3 }), fc.integer()),
    { numRuns: 300, seed: 4242 },
  ).map(([value, numbers, seed]) => {
    let r = seed;
    const rand = () => ((r = (r * 1103515245 + 12345) & 0x7fffffff) / 0x80000000);
    const text = variantText(value, rand);
    // Splice raw number spellings in as extra members (the variant generator writes JSON numbers).
    const extra = numbers.map(([k, n]) => `${JSON.stringify(k)} : ${n}`).join(' ,\n');
    return text === '{}' ? `{${extra}}` : `{${extra},${text.slice(1)}`;
  });
  return [...fixed, ...numbered];
}

describe('docs/signing.md client recipes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pixgate-recipes-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const inputs = bodies();
  const expected = inputs.map((text) => {
    const canonical = canonicalize(text);
    return { canonical, v1: signV1(SECRET, canonical) };
  });
  const input = JSON.stringify({ secret: SECRET, texts: inputs });

  it(`the Node recipe signs all ${inputs.length} bodies as the server checks them`, () => {
    writeFileSync(join(dir, 'recipe.mjs'), recipe('node', 'js'));
    writeFileSync(
      join(dir, 'driver.mjs'),
      `import { readFileSync } from 'node:fs';
import { canonicalJson, signV1 } from './recipe.mjs';
const { secret, texts } = JSON.parse(readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(texts.map((t) => ({ canonical: canonicalJson(t), v1: signV1(secret, t) }))));
`,
    );
    const out = JSON.parse(execFileSync(process.execPath, [join(dir, 'driver.mjs')], { input, maxBuffer: 64 * 1024 * 1024 }).toString('utf8'));
    for (let i = 0; i < inputs.length; i++) expect(out[i], inputs[i]).toEqual(expected[i]);
  });

  it(`the Python recipe signs all ${inputs.length} bodies as the server checks them`, () => {
    writeFileSync(
      join(dir, 'recipe.py'),
      `${recipe('python', 'python')}

if __name__ == "__main__":
    import sys
    data = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    out = [{"canonical": canonical_json(t), "v1": sign_v1(data["secret"], t)} for t in data["texts"]]
    sys.stdout.buffer.write(json.dumps(out, ensure_ascii=True).encode("ascii"))
`,
    );
    const out = JSON.parse(execFileSync('python3', [join(dir, 'recipe.py')], { input, maxBuffer: 64 * 1024 * 1024 }).toString('utf8'));
    for (let i = 0; i < inputs.length; i++) expect(out[i], inputs[i]).toEqual(expected[i]);
  });

  it('the re-serializing signers the old text recommended are refused for these bodies (why the recipes parse the text)', () => {
    // JSON.stringify of a key-sorted object rewrites 1e2 as 100 and sorts 😀 before U+FF21.
    const naive = (text: string) => {
      const sortKeys = (v: unknown): unknown =>
        Array.isArray(v) ? v.map(sortKeys) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])])) : v;
      return JSON.stringify(sortKeys(JSON.parse(text)));
    };
    for (const text of ['{"amount":1e2}', '{"amount":10.0}', '{"\\uff21":1,"😀":2}']) expect(naive(text)).not.toBe(canonicalize(text));
  });
});
