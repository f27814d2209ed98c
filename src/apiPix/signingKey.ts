import { createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import type { Sql } from '../db/db.js';
import { rsaJwsSigner, type JwsSigner } from '../lib/jws.js';

/**
 * The signer of the payload locations' JWS: one RSA key for the installation (migration 1030),
 * made by the first process that needs it, so that every process signs with the key the JWK set
 * publishes.
 */
export async function installationSigner(sql: Sql): Promise<JwsSigner> {
  const [existing] = await sql.query<{ kid: string; private_pem: string }>('SELECT kid, private_pem FROM api_pix_signing_key WHERE id = 1');
  if (existing) return rsaJwsSigner(createPrivateKey(existing.private_pem), existing.kid);
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  await sql.query('INSERT INTO api_pix_signing_key (id, kid, private_pem) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING', [randomBytes(8).toString('hex'), pem]);
  const [row] = await sql.query<{ kid: string; private_pem: string }>('SELECT kid, private_pem FROM api_pix_signing_key WHERE id = 1');
  return rsaJwsSigner(createPrivateKey(row!.private_pem), row!.kid);
}
