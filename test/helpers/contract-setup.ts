import { afterEach } from 'vitest';
import { takeContractViolations } from './contract.js';

// Every test fails when one of its exchanges with the server was outside the OpenAPI document.
// The message lists each distinct violation once (a fuzzer repeats the same one many times).
afterEach(() => {
  const found = takeContractViolations();
  if (found.length === 0) return;
  const distinct = new Map<string, number>();
  for (const v of found) {
    const key = v.replace(/ \(body .*$/s, '').replace(/ in [[{"].*$/s, '');
    distinct.set(key, (distinct.get(key) ?? 0) + 1);
  }
  const lines = [...distinct].slice(0, 60).map(([v, n]) => (n > 1 ? `${v} (×${n})` : v));
  const example = found[0]!.slice(0, 1500);
  throw new Error(`OpenAPI contract violations (${found.length}, ${distinct.size} distinct):\n${lines.join('\n')}\nfirst in full: ${example}`);
});
