import type { AppContext } from '../../context.js';
import * as webhookRepo from '../../webhooks/repository.js';
import { dictionary } from '../i18n.js';
import type { PortalSession } from '../session.js';

/** What the webhook pages share: their words, the key's scope and the lookup of one of its webhooks. */

export const W = dictionary(
  {
    title: 'Webhooks',
    url: 'URL',
    events: 'Events',
    status: 'Status',
    none: 'No webhooks yet.',
    delete: 'Delete',
    deleteLabel: (url: string) => `Delete webhook ${url}`,
    newTitle: 'New webhook',
    description: 'Description',
    secret: 'Secret (optional; generated when empty)',
    insecure: 'Allow http:// (testing only)',
    create: 'Create webhook',
    created: (secret: string) => `Webhook created. Its signing secret: ${secret}`,
    deleted: 'Webhook deleted',
    notFound: 'webhook not found',
  },
  {
    title: 'Webhooks',
    url: 'URL',
    events: 'Eventos',
    status: 'Situação',
    none: 'Nenhum webhook ainda.',
    delete: 'Excluir',
    deleteLabel: (url) => `Excluir o webhook ${url}`,
    newTitle: 'Novo webhook',
    description: 'Descrição',
    secret: 'Segredo (opcional; gerado quando vazio)',
    insecure: 'Permitir http:// (só para testes)',
    create: 'Criar webhook',
    created: (secret) => `Webhook criado. O segredo de assinatura dele: ${secret}`,
    deleted: 'Webhook excluído',
    notFound: 'webhook não encontrado',
  },
);

/** The webhooks the session's key sees: its merchant's, and only its account's for an account key. */
export const scopeOf = (s: PortalSession): webhookRepo.WebhookScope => ({ merchantId: s.key.merchant_id, accountId: s.key.account_id });

/** A webhook of the key's scope, or undefined (not an id, not found, deleted, or another's). */
export async function findOwnWebhook(ctx: AppContext, s: PortalSession, id: string) {
  if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
  const w = await webhookRepo.findWebhook(ctx.db, id.toLowerCase());
  const scope = scopeOf(s);
  if (!w || w.deleted_at || w.merchant_id !== scope.merchantId || (scope.accountId !== null && w.account_id !== scope.accountId)) return undefined;
  return w;
}

