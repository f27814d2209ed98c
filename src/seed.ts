import { createApiKey } from './auth/apiKeys.js';
import { PERMISSIONS } from './auth/permissions.js';
import type { AppContext } from './context.js';
import { countMerchants } from './merchants/repository.js';
import { createMerchant, deposit } from './merchants/service.js';
import { registerOwnKey } from './pix/ownKeys.js';

export interface DemoCredentials {
  merchantId: number;
  accountId: number;
  clientId: string;
  clientSecret: string;
  pixKeys: string[];
}

export const DEMO = {
  merchantName: 'Loja Demo pixgate',
  document: '11222333000181',
  depositCents: 1_000_000,
  email: 'demo@pixgate.dev',
  ipWhitelist: ['127.0.0.1', '::1'],
};

/**
 * In APP_ENV=local on an empty database: a demo merchant with a funded account (R$ 10,000.00), two
 * PIX keys and an API key holding every permission for 127.0.0.1 and ::1. Returns the credentials
 * (to be printed once), or null when the database already has merchants.
 */
export async function seedDemo(ctx: AppContext): Promise<DemoCredentials | null> {
  if ((await countMerchants(ctx.db)) > 0) return null;
  const { merchant, account } = await createMerchant(ctx.db, { name: DEMO.merchantName, document: DEMO.document });
  await deposit(ctx.db, ctx.clock, { accountId: account.id, amountCents: DEMO.depositCents, description: 'Demo funding' });
  const email = await registerOwnKey(ctx.db, ctx.rail, { accountId: account.id, type: 'email', key: DEMO.email });
  const evp = await registerOwnKey(ctx.db, ctx.rail, { accountId: account.id, type: 'evp' });
  const { key, clientSecret } = await createApiKey(ctx.db, {
    merchantId: merchant.id,
    accountId: account.id,
    permissions: [...PERMISSIONS],
    ipWhitelist: DEMO.ipWhitelist,
  });
  return {
    merchantId: merchant.id,
    accountId: account.id,
    clientId: key.client_id,
    clientSecret,
    pixKeys: [email.key, evp.key],
  };
}
