import type { Database, Sql } from '../db/db.js';
import type { Clock } from '../lib/clock.js';
import { newUuid } from '../lib/ids.js';
import { brCodeKey } from '../pix/keys.js';
import { destinationProblem, isAllowedHost, parseAllowedHosts } from '../webhooks/destination.js';
import { MAX_WEBHOOKS_PER_MERCHANT, newWebhookSecret, URL_MAX_LENGTH } from '../webhooks/registration.js';
import * as engine from '../webhooks/repository.js';
import { pixProblem } from './pixProblems.js';
import { queryReader, type PixQuery } from './pixReceived.js';
import type { ReceiverScope } from './pixStore.js';

/**
 * The standard's webhooks (PUT/GET/DELETE /webhook/{chave}, GET /webhook): one per PIX key of the
 * receiver, riding on the delivery engine (src/webhooks). Each is a row of `api_pix_webhooks`
 * owning one registration of the engine's `webhooks` table whose url is `{webhookUrl}/pix`; the
 * engine's retries, per-subject order, signing headers and private-range checks apply as they are
 * (docs/decisions.md, "API Pix webhooks on the delivery engine").
 */

export interface PixWebhookDeps {
  db: Database;
  clock: Clock;
  config: { webhookAllowedHosts: readonly string[]; appEnv: string };
}

export interface PixWebhookOwner extends ReceiverScope {
  clientId: string | null;
}

interface SubscriptionRow {
  id: string;
  merchant_id: number;
  account_id: number;
  chave: string;
  webhook_url: string;
  webhook_id: string;
  created_at: Date;
}

const INVALID = 'A requisição de webhook não respeita o schema ou apresenta semântica inválida.';
/** The engine event a batch of Pix is delivered as (internal: never listed nor subscribable). */
export const PIX_WEBHOOK_EVENT = 'api_pix.pix';

function invalid(razao: string, propriedade: string) {
  return pixProblem('bad_request', 'WebhookOperacaoInvalida', INVALID, [{ razao, propriedade }]);
}

/** The webhook as the standard shows it. */
export function webhookView(w: SubscriptionRow) {
  return { webhookUrl: w.webhook_url, chave: w.chave, criacao: w.created_at.toISOString() };
}

/** The receiver's key the path names (as registered), with its account; WebhookOperacaoInvalida when it is none. */
async function ownKey(sql: Sql, scope: ReceiverScope, chave: string): Promise<{ account_id: number; key: string }> {
  if (chave.length < 1 || chave.length > 77) throw invalid('O parâmetro chave não corresponde a uma chave DICT válida.', 'chave');
  const candidates = [chave, brCodeKey(chave)?.key].filter((k): k is string => typeof k === 'string');
  const [row] = await sql.query<{ account_id: number; key: string }>(
    `SELECT k.account_id, k.key FROM pix_keys k JOIN accounts a ON a.id = k.account_id
      WHERE a.merchant_id = $1 AND ($2::bigint IS NULL OR k.account_id = $2) AND k.status = 'active' AND k.key = ANY($3::text[])
      ORDER BY k.created_at LIMIT 1`,
    [scope.merchantId, scope.accountId, candidates],
  );
  if (!row) throw invalid('O parâmetro chave não corresponde a uma chave DICT pertencente a este usuário recebedor.', 'chave');
  return row;
}

/** Validates webhookUrl: an absolute https URL (http only in local mode on WEBHOOK_ALLOWED_HOSTS), not private. */
export function checkWebhookUrl(ctx: Pick<PixWebhookDeps, 'config'>, body: unknown): { webhookUrl: string; deliverTo: string; insecure: boolean } {
  const raw = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>).webhookUrl : undefined;
  const bad = (razao: string) => invalid(razao, 'webhook.webhookUrl');
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > URL_MAX_LENGTH - 4) throw bad('Campo webhook.webhookUrl não respeita o schema.');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad('Campo webhook.webhookUrl não respeita o schema: não é uma URL absoluta.');
  }
  if (url.username !== '' || url.password !== '' || url.hash !== '') throw bad('Campo webhook.webhookUrl não pode conter usuário, senha ou fragmento.');
  const allowed = parseAllowedHosts(ctx.config.webhookAllowedHosts);
  const insecure = url.protocol === 'http:';
  if (url.protocol !== 'https:' && !(insecure && ctx.config.appEnv === 'local' && isAllowedHost(allowed, url))) {
    throw bad('Campo webhook.webhookUrl deve usar https (http só em modo local, para um destino de WEBHOOK_ALLOWED_HOSTS).');
  }
  const problem = destinationProblem(url, allowed);
  if (problem !== null) throw bad(`Campo webhook.webhookUrl aponta para um destino privado ou reservado (${url.hostname}: ${problem}).`);
  const deliver = new URL(url.href);
  deliver.pathname = `${deliver.pathname.replace(/\/+$/, '')}/pix`;
  return { webhookUrl: raw, deliverTo: deliver.href, insecure };
}

/** PUT /webhook/{chave}: sets (or replaces) the key's webhook; its notices and pending deliveries carry over. */
export async function putPixWebhook(ctx: PixWebhookDeps, owner: PixWebhookOwner, chave: string, body: unknown): Promise<ReturnType<typeof webhookView>> {
  const target = checkWebhookUrl(ctx, body);
  const key = await ownKey(ctx.db, owner, chave);
  return ctx.db.transaction(async (tx) => {
    await engine.lockMerchantWebhooks(tx, owner.merchantId);
    const now = ctx.clock.now();
    const [current] = await tx.query<SubscriptionRow>(
      `SELECT s.* FROM api_pix_webhooks s JOIN webhooks w ON w.id = s.webhook_id AND w.deleted_at IS NULL
        WHERE s.account_id = $1 AND s.chave = $2 FOR UPDATE OF s`,
      [key.account_id, key.key],
    );
    if (current) {
      await engine.setWebhookUrl(tx, current.webhook_id, target.deliverTo, target.insecure);
      const [row] = await tx.query<SubscriptionRow>('UPDATE api_pix_webhooks SET webhook_url = $2, updated_at = $3 WHERE id = $1 RETURNING *', [
        current.id,
        target.webhookUrl,
        now,
      ]);
      return webhookView(row!);
    }
    // Each one is a registration of the engine: the merchant's bound on those holds for them too.
    if ((await engine.countLiveWebhooks(tx, owner.merchantId)) >= MAX_WEBHOOKS_PER_MERCHANT) {
      throw invalid(`O limite de ${MAX_WEBHOOKS_PER_MERCHANT} webhooks do usuário recebedor foi atingido.`, 'chave');
    }
    // A registration whose engine row was deleted elsewhere (DELETE /webhooks/{id}) is replaced.
    await tx.query('DELETE FROM api_pix_webhooks WHERE account_id = $1 AND chave = $2', [key.account_id, key.key]);
    const hook = await engine.insertWebhook(tx, {
      id: newUuid(),
      merchantId: owner.merchantId,
      accountId: key.account_id,
      clientId: owner.clientId,
      url: target.deliverTo,
      events: [PIX_WEBHOOK_EVENT],
      secret: newWebhookSecret(),
      description: `API Pix webhook of key ${key.key}`,
      allowInsecure: target.insecure,
    });
    const [row] = await tx.query<SubscriptionRow>(
      `INSERT INTO api_pix_webhooks (id, merchant_id, account_id, chave, webhook_url, webhook_id, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING *`,
      [newUuid(), owner.merchantId, key.account_id, key.key, target.webhookUrl, hook.id, now],
    );
    return webhookView(row!);
  });
}

const LIVE = `SELECT s.* FROM api_pix_webhooks s JOIN webhooks w ON w.id = s.webhook_id AND w.deleted_at IS NULL
               WHERE s.merchant_id = $1 AND ($2::bigint IS NULL OR s.account_id = $2)`;

async function findLive(sql: Sql, scope: ReceiverScope, chave: string): Promise<SubscriptionRow | undefined> {
  const candidates = [chave, brCodeKey(chave)?.key].filter((k): k is string => typeof k === 'string');
  const [row] = await sql.query<SubscriptionRow>(`${LIVE} AND s.chave = ANY($3::text[]) ORDER BY s.created_at LIMIT 1`, [scope.merchantId, scope.accountId, candidates]);
  return row;
}

function notFound(chave: string) {
  return pixProblem('not_found', 'WebhookNaoEncontrado', `Webhook da chave ${chave} não encontrado.`);
}

/** GET /webhook/{chave}. */
export async function getPixWebhook(ctx: Pick<PixWebhookDeps, 'db'>, scope: ReceiverScope, chave: string) {
  const row = await findLive(ctx.db, scope, chave);
  if (!row) throw notFound(chave);
  return webhookView(row);
}

/** DELETE /webhook/{chave}: the engine's registration is deleted (its pending deliveries cancelled), notices dropped. */
export async function deletePixWebhook(ctx: Pick<PixWebhookDeps, 'db'>, scope: ReceiverScope, chave: string): Promise<void> {
  const row = await findLive(ctx.db, scope, chave);
  if (!row) throw notFound(chave);
  await ctx.db.transaction(async (tx) => {
    await engine.deleteWebhook(tx, { merchantId: row.merchant_id, accountId: null }, row.webhook_id);
    await tx.query('DELETE FROM api_pix_webhooks WHERE id = $1', [row.id]);
  });
}

/** Validates GET /webhook's query (inicio, fim and the page, all optional): 400 WebhookConsultaInvalida. */
export function parseWebhookQuery(q: PixQuery) {
  const { violacoes, window } = queryReader(q);
  const f = window(false);
  if (violacoes.length > 0) {
    throw pixProblem('bad_request', 'WebhookConsultaInvalida', 'Os parâmetros de consulta à lista de webhooks não respeitam o schema ou não fazem sentido semanticamente.', violacoes);
  }
  return f;
}

/** GET /webhook: the receiver's webhooks created in [inicio, fim] when given, a page of them. */
export async function listPixWebhooks(
  ctx: Pick<PixWebhookDeps, 'db'>,
  scope: ReceiverScope,
  f: { inicio?: Date | undefined; fim?: Date | undefined; page: number; perPage: number },
) {
  const rows = await ctx.db.query<SubscriptionRow & { total: number }>(
    `SELECT x.*, count(*) OVER ()::int AS total FROM (${LIVE}
        AND ($3::timestamptz IS NULL OR s.created_at >= $3) AND ($4::timestamptz IS NULL OR s.created_at <= $4)) x
      ORDER BY x.created_at, x.id LIMIT $5 OFFSET $6`,
    [scope.merchantId, scope.accountId, f.inicio ?? null, f.fim ?? null, f.perPage, f.page * f.perPage],
  );
  const total = rows[0]?.total ?? (f.page === 0 ? 0 : await countLive(ctx.db, scope, f));
  return {
    parametros: {
      ...(f.inicio ? { inicio: f.inicio.toISOString() } : {}),
      ...(f.fim ? { fim: f.fim.toISOString() } : {}),
      paginacao: {
        paginaAtual: f.page,
        itensPorPagina: f.perPage,
        quantidadeDePaginas: Math.max(1, Math.ceil(total / f.perPage)),
        quantidadeTotalDeItens: total,
      },
    },
    webhooks: rows.map(webhookView),
  };
}

async function countLive(sql: Sql, scope: ReceiverScope, f: { inicio?: Date | undefined; fim?: Date | undefined }): Promise<number> {
  const [row] = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (${LIVE}
        AND ($3::timestamptz IS NULL OR s.created_at >= $3) AND ($4::timestamptz IS NULL OR s.created_at <= $4)) x`,
    [scope.merchantId, scope.accountId, f.inicio ?? null, f.fim ?? null],
  );
  return row!.n;
}
