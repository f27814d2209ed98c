import { sha256Hex, signRequest } from '@pixgate/sdk';
import { readData } from './api.js';
import { loadCredentials } from './credentials.js';
import { EXIT, paint, str, UsageError, type Args, type CliIo } from './io.js';

/**
 * pixgate sign -d BODY [--path /pix/cash-out] [--method POST] [--v1] [--idempotency-key K]
 *              [--timestamp T] [--nonce N] [--explain] [--json]
 * Prints the signature headers for a body; --explain adds the canonical body, the exact string the
 * HMAC covers and its SHA-256 — the server answers the SHA-256 of the string it verified in
 * X-Signature-Canonical-SHA256 when it refuses a signature outside production.
 */
export async function signCommand(args: Args, io: CliIo): Promise<number> {
  const body = readData(args, io);
  if (body === undefined) throw new UsageError('usage: pixgate sign -d BODY [--path PATH] [--v1] [--explain]');
  const creds = loadCredentials(args, io);
  const secret = creds.clientSecret;
  if (!secret) throw new UsageError('no client secret: pass --client-secret or set PIXGATE_CLIENT_SECRET');
  const path = str(args, 'path') ?? '/pix/cash-out';
  const fullPath = path.startsWith('/api/external') ? path : `/api/external${path.startsWith('/') ? '' : '/'}${path}`;
  const timestamp = str(args, 'timestamp');
  const nonce = str(args, 'nonce');
  const idem = str(args, 'idempotency-key');
  let signed;
  try {
    signed = await signRequest({
      version: args.flags.has('v1') ? 'v1' : 'v2',
      clientSecret: secret,
      method: str(args, 'method') ?? 'POST',
      path: fullPath,
      body,
      ...(idem ? { idempotencyKey: idem } : {}),
      ...(timestamp ? { timestamp: Number(timestamp) } : {}),
      ...(nonce ? { nonce } : {}),
    });
  } catch (err) {
    throw new UsageError(`the body is not JSON: ${(err as Error).message}`);
  }
  const headers = { ...(creds.clientId ? { authorization: `ApiKey ${creds.clientId}:${secret}` } : {}), 'content-type': 'application/json', ...signed.headers };
  const signedSha = await sha256Hex(signed.signedString);
  if (args.flags.has('json')) {
    io.stdout(JSON.stringify({ headers, canonical_body: signed.canonicalBody, signed_string: signed.signedString, signed_string_sha256: signedSha }) + '\n');
    return EXIT.ok;
  }
  for (const [k, v] of Object.entries(headers)) io.stdout(`${k}: ${v}\n`);
  if (args.flags.has('explain')) {
    const p = paint(io);
    io.stdout(`\n${p.bold('canonical body')} (keys sorted at every depth, no whitespace, numbers as sent):\n${signed.canonicalBody}\n`);
    if (signed.signedString !== signed.canonicalBody) io.stdout(`\n${p.bold('string signed')} (v2: version, timestamp, nonce, method, path, Idempotency-Key, canonical body, joined by \\n):\n${signed.signedString}\n`);
    io.stdout(`\n${p.bold('SHA-256 of the string signed')}: ${signedSha}\n`);
    io.stdout(`${p.dim('Outside production a refused signature answers X-Signature-Canonical-SHA256 with the same hash of what the server verified: different hashes mean the bodies or headers differ.')}\n`);
  }
  return EXIT.ok;
}
