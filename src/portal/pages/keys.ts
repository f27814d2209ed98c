import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKeyRow } from '../../auth/apiKeys.js';
import { parseWhitelistEntry } from '../../auth/ipWhitelist.js';
import { createKey, DEFAULT_GRACE_SECONDS, endGraces, listKeys, revokeKey, rotateKey } from '../../auth/keyLifecycle.js';
import type { Actor } from '../../auth/merchantAudit.js';
import { isPermission, PERMISSIONS, type Permission } from '../../auth/permissions.js';
import { idempotencyScopePath } from '../../external/stages/request.js';
import { formatsOf } from '../i18n.js';
import { common } from '../messages.js';
import { claimForm, FORM_FIELD, isFormId, recordOutcome } from '../forms.js';
import { many, one, opt, type Form } from '../formBody.js';
import { html, type Html } from '../html.js';
import { errorText } from '../errors.js';
import type { Portal } from '../kit.js';
import { can, type PortalSession } from '../session.js';
import { stepUpRequired } from '../stepUp.js';
import { keysText } from './keysText.js';

/** The grace periods the rotate form offers, in seconds (the domain bounds them: keyLifecycle.ts). */
const GRACES = [0, 3600, DEFAULT_GRACE_SECONDS, 3 * 86400, 7 * 86400] as const;

/** Who acts, as the audit log and the key events record it. */
export function actorOf(portal: Portal, req: FastifyRequest): Actor {
  const s = req.portal!;
  return s.member
    ? { type: 'member', id: String(s.member.id), label: s.member.email, ip: portal.clientIp(req) }
    : { type: 'api_key', id: s.key.client_id!, ip: portal.clientIp(req) };
}

/**
 * The API keys page (docs/portal.md "API keys"): the merchant's keys with their last use, create
 * (the secret shown once, on the answer to the form — never stored or redirected), rotate with a
 * grace period, revoke. Opens with `keys:read`; every change needs `keys:write` and a fresh second
 * factor (step-up). Each change fires its api_key.* event and audit row (src/auth/keyLifecycle.ts).
 */
export function keyPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;
  const form = (req: FastifyRequest) => (req.body ?? {}) as Form;

  const graceLabel = (req: FastifyRequest, seconds: number) => {
    const t = keysText(req.i18n);
    return seconds === 0 ? t.graceNone : seconds < 86400 ? t.graceHours(seconds / 3600) : seconds === 86400 ? t.graceHours(24) : t.graceDays(seconds / 86400);
  };

  const keysPage = async (req: FastifyRequest, problems: string[] = [], typed: Form = {}) => {
    const s = req.portal!;
    const t = keysText(req.i18n);
    const f = formatsOf(req.i18n);
    await endGraces(ctx, s.key.merchant_id); // graces past their end are closed (and announced) before they are shown
    const keys = await listKeys(ctx.db, s.key.merchant_id);
    const writable = can(s, 'keys:write');
    const rows = keys.map(
      (k) => html`<tr data-client-id="${k.client_id}"><td data-label="${t.name}">${k.name || '—'}</td><td data-label="${t.clientId}" class="mono">${k.client_id}</td>
<td data-label="${t.scope}">${k.account_id === null ? t.allAccounts : t.account(k.account_id)}</td><td data-label="${t.permissions}" class="hide-sm">${k.permissions.join(', ')}</td>
<td data-label="${t.lastUsed}" data-testid="last-used">${k.last_used_at ? html`${f.dateTime(k.last_used_at)}<br><span class="muted">${t.fromIp(k.last_used_ip ?? '')}</span>` : html`<span class="muted">${t.never}</span>`}</td>
<td data-label="${t.status}">${!k.active ? html`<span class="badge failed">${t.revoked}</span>` : k.previous_secret_expires_at ? html`<span class="badge pending">${t.rotatingBadge}</span><br><span class="muted">${t.rotating(f.dateTime(k.previous_secret_expires_at))}</span>` : html`<span class="badge completed">${t.active}</span>`}</td>
<td${writable && k.active ? html` data-label="${t.actions}"` : ''}>${writable && k.active ? actions(req, k.client_id) : ''}</td></tr>`,
    );
    return layout(
      req,
      t.title,
      html`<p class="muted">${t.intro}</p>
${keys.length ? html`<div class="scroll"><table class="cards"><thead><tr><th>${t.name}</th><th>${t.clientId}</th><th>${t.scope}</th><th class="hide-sm">${t.permissions}</th><th>${t.lastUsed}</th><th>${t.status}</th><th>${t.actions}</th></tr></thead><tbody>${rows}</tbody></table></div>` : html`<p>${t.none}</p>`}
<p class="muted">${t.events}</p>
${writable ? createForm(req, problems, typed) : ''}`,
      '/portal/keys',
    );
  };

  const actions = (req: FastifyRequest, clientId: string): Html => {
    const t = keysText(req.i18n);
    return html`<form class="inline" method="post" action="/portal/keys/${clientId}/rotate">${portal.csrfField(req)}
<label>${t.grace} <select name="grace_seconds">${GRACES.map((g) => html`<option value="${g}"${g === DEFAULT_GRACE_SECONDS ? html` selected` : ''}>${graceLabel(req, g)}</option>`)}</select></label>
<button type="submit" class="secondary">${t.rotate}</button></form>
<form class="inline" method="post" action="/portal/keys/${clientId}/revoke">${portal.csrfField(req)}<button type="submit" class="danger">${t.revoke}</button></form>`;
  };

  const createForm = (req: FastifyRequest, problems: string[], typed: Form) => {
    const t = keysText(req.i18n);
    const s = req.portal!;
    const chosen = typed.permissions === undefined ? ['account:read', 'statement:read', 'pix:read', 'transfer:read'] : many(typed, 'permissions');
    return html`<h2>${t.create}</h2>
${problems.length ? html`<div class="flash error" role="alert"><p>${common(req.i18n).fixFields}</p><ul>${problems.map((p) => html`<li>${p}</li>`)}</ul></div>` : ''}
<form class="stack card" method="post" action="/portal/keys">${portal.csrfField(req)}
<label>${t.name} <input name="name" maxlength="80" value="${one(typed, 'name') ?? ''}"></label>
<label>${t.scope} <select name="scope"><option value="merchant">${t.allAccounts}</option><option value="account"${one(typed, 'scope') === 'account' ? html` selected` : ''}>${t.account(s.accountId)}</option></select></label>
<fieldset><legend>${t.permissions}</legend>${PERMISSIONS.map((p) => html`<label class="check"><input type="checkbox" name="permissions" value="${p}"${chosen.includes(p) ? html` checked` : ''}> ${p}</label>`)}</fieldset>
<label>${t.ipWhitelist} <textarea name="ip_whitelist" rows="3" spellcheck="false">${one(typed, 'ip_whitelist') ?? portal.clientIp(req)}</textarea></label>
<label class="check"><input type="checkbox" name="hmac" value="1"${typed.name === undefined || one(typed, 'hmac') ? html` checked` : ''}> ${t.hmac}</label>
<button type="submit">${t.createButton}</button></form>`;
  };

  /** The page that shows a secret once (the answer to a create or rotate form). */
  const secretPage = (req: FastifyRequest, key: ApiKeyRow, secret: string, message: string) => {
    const t = keysText(req.i18n);
    return layout(
      req,
      t.title,
      html`<div class="flash ok" role="status">${message}</div><div class="card"><p><strong>${t.secretOnce}</strong></p>
<p class="label">${t.clientId}</p><p class="mono" data-testid="client-id">${key.client_id}</p>
<p class="label">${t.clientSecret}</p><p class="mono" data-testid="client-secret">${secret}</p>
<p><a class="button" href="/portal/keys">${t.backToKeys}</a></p></div>`,
      '/portal/keys',
    );
  };

  const guard = (req: FastifyRequest, reply: FastifyReply, capability: 'keys:read' | 'keys:write'): FastifyReply | null => {
    if (!can(req.portal!, capability)) return forbidden(req, reply, capability);
    return capability === 'keys:write' ? stepUpRequired(portal, req, reply, '/portal/keys') : null;
  };

  /**
   * Runs a change that answers with a secret, once per form id: a repeat of the form (a double
   * click, a reload) gets "already sent", never a second key or a second rotation.
   */
  const once = async (req: FastifyRequest, reply: FastifyReply, run: (record: (tx: Parameters<typeof recordOutcome>[1]) => Promise<void>) => Promise<string>) => {
    const s: PortalSession = req.portal!;
    const formId = one(form(req), FORM_FIELD);
    if (!isFormId(formId)) return page(reply, layout(req, common(req.i18n).refused, html`<p>${common(req.i18n).noFormId}</p>`), 400);
    const claimed = await claimForm(ctx.idempotency, { merchantId: s.key.merchant_id, method: 'POST', path: idempotencyScopePath(req), key: formId });
    if (claimed.kind === 'busy') return page(reply, layout(req, common(req.i18n).stillRunning, html`<p>${common(req.i18n).stillRunningText}</p>`), 409);
    if (claimed.kind === 'replay') return page(reply, layout(req, keysText(req.i18n).title, html`<div class="flash error" role="alert">${keysText(req.i18n).alreadySent}</div><p><a href="/portal/keys">${keysText(req.i18n).backToKeys}</a></p>`), 409);
    const { claim } = claimed;
    try {
      return page(reply, await run((tx) => recordOutcome(claim, tx, { kind: 'ok', text: 'done', redirect: '/portal/keys' })));
    } catch (err) {
      await ctx.idempotency.release(claim);
      const status = (err as { code?: string }).code === 'not_found' ? 404 : 409;
      return page(reply, layout(req, keysText(req.i18n).title, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div><p><a href="/portal/keys">${keysText(req.i18n).backToKeys}</a></p>`), status);
    }
  };

  app.get('/portal/keys', async (req, reply) => guard(req, reply, 'keys:read') ?? page(reply, await keysPage(req)));

  app.post('/portal/keys', async (req, reply) => {
    const stop = guard(req, reply, 'keys:write');
    if (stop) return stop;
    const t = keysText(req.i18n);
    const f = form(req);
    const problems: string[] = [];
    const name = (one(f, 'name') ?? '').trim();
    if (name.length > 80) problems.push(t.fieldName);
    const permissions = many(f, 'permissions').filter(isPermission) as Permission[];
    if (permissions.length === 0) problems.push(t.fieldPermissions);
    const whitelist = (opt(f, 'ip_whitelist') ?? '').split(/[\s,]+/).filter(Boolean).slice(0, 50);
    if (whitelist.length === 0) problems.push(t.fieldWhitelistEmpty);
    for (const e of whitelist) if (!parseWhitelistEntry(e)) problems.push(t.fieldWhitelist(e.slice(0, 60)));
    if (problems.length) return page(reply, await keysPage(req, problems, f), 422);
    const s = req.portal!;
    return once(req, reply, async (record) => {
      const { key, clientSecret } = await createKey(ctx, actorOf(portal, req), {
        merchantId: s.key.merchant_id,
        accountId: one(f, 'scope') === 'account' ? s.accountId : null,
        name,
        permissions: [...new Set(permissions)],
        ipWhitelist: whitelist,
        hmac: one(f, 'hmac') === '1',
        record,
      });
      ctx.credentials.invalidate(`key:${key.client_id}`); // this process at once; the others at commit (auth_changed)
      return secretPage(req, key, clientSecret, t.created);
    });
  });

  app.post('/portal/keys/:client_id/rotate', async (req, reply) => {
    const stop = guard(req, reply, 'keys:write');
    if (stop) return stop;
    const { client_id } = req.params as { client_id: string };
    const grace = Number(one(form(req), 'grace_seconds') ?? DEFAULT_GRACE_SECONDS);
    return once(req, reply, async (record) => {
      const { key, clientSecret } = await rotateKey(ctx, actorOf(portal, req), req.portal!.key.merchant_id, client_id, grace, record);
      ctx.credentials.invalidate(`key:${key.client_id}`);
      const until = key.previous_secret_expires_at ? formatsOf(req.i18n).dateTime(key.previous_secret_expires_at) : null;
      return secretPage(req, key, clientSecret, keysText(req.i18n).rotated(until));
    });
  });

  app.post('/portal/keys/:client_id/revoke', async (req, reply) => {
    const stop = guard(req, reply, 'keys:write');
    if (stop) return stop;
    const { client_id } = req.params as { client_id: string };
    return portal.action(req, reply, '/portal/keys', async () => {
      await revokeKey(ctx, actorOf(portal, req), req.portal!.key.merchant_id, client_id);
      ctx.credentials.invalidate(`key:${client_id}`);
      return keysText(req.i18n).revokedDone;
    });
  });
}
