import { createApiKey } from './auth/apiKeys.js';
import { PERMISSIONS } from './auth/permissions.js';
import type { AppContext } from './context.js';
import { countMerchants } from './merchants/repository.js';
import { createMerchant, deposit } from './merchants/service.js';
import { registerOwnKey } from './pix/ownKeys.js';
import { simulator } from './sandbox/actions.js';

export interface DemoCredentials {
  merchantId: number;
  accountId: number;
  clientId: string;
  clientSecret: string;
  pixKeys: string[];
  /** Keys of other banks registered in the simulated directory, which a cash-out can pay. */
  receiverKeys: string[];
}

export const DEMO = {
  merchantName: 'Loja Demo pixgate',
  document: '11222333000181',
  depositCents: 1_000_000,
  email: 'demo@pixgate.dev',
  ipWhitelist: ['127.0.0.1', '::1'],
  /**
   * The receivers the README's quick start and docs pay (`maria@example.com`): keys of another
   * bank in the simulated directory, whose payments settle. The README registers the same key
   * again by the sandbox API, which updates it.
   */
  receivers: [{ key: 'maria@example.com', type: 'email', name: 'Maria', document: '52998224725', ispb: '18236120' }] as const,
};

/**
 * In APP_ENV=local on an empty database: a demo merchant with a funded account (R$ 10,000.00), two
 * PIX keys and an API key holding every permission for 127.0.0.1 and ::1, and the quick start's
 * receivers at another bank in the simulated directory. Returns the credentials
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
  const sim = simulator(ctx);
  const receiverKeys: string[] = [];
  for (const r of sim ? DEMO.receivers : []) {
    const registered = await sim!.registerForeignKey({ ...r, bankName: null, behavior: 'settle', fraudFlagged: false });
    if (registered.ok) receiverKeys.push(registered.value.row.key);
  }
  return {
    merchantId: merchant.id,
    accountId: account.id,
    clientId: key.client_id,
    clientSecret,
    pixKeys: [email.key, evp.key],
    receiverKeys,
  };
}
