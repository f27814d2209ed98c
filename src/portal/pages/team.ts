import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidFields } from '../../errors/catalog.js';
import { changeMember, inviteMember, listMembers, setRequireTotp, type Invitation } from '../../auth/members.js';
import { listAudit } from '../../auth/merchantAudit.js';
import { isRole, mayManage, PORTAL_CAPABILITIES, ROLE_CAPABILITIES, ROLES, type Role } from '../../auth/roles.js';
import { PERMISSIONS } from '../../auth/permissions.js';
import { idempotencyScopePath } from '../../external/stages/request.js';
import { claimForm, FORM_FIELD, isFormId, recordOutcome } from '../forms.js';
import { one, type Form } from '../formBody.js';
import { formatsOf } from '../i18n.js';
import { common } from '../messages.js';
import { html } from '../html.js';
import { errorText } from '../errors.js';
import type { Portal } from '../kit.js';
import { can } from '../session.js';
import { stepUpRequired } from '../stepUp.js';
import { actorOf } from './keys.js';
import { teamText } from './teamText.js';

/**
 * The team page (docs/portal.md "Team members"): members with their roles, invitations (a one-time
 * set-password link shown once on the answer), role changes and removal under the role rules
 * (src/auth/roles.ts), the owner's "require a second factor", the table of roles and the audit
 * log. An API key's session sees only the creation of the first owner, while there is none.
 */
export function teamPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;
  const form = (req: FastifyRequest) => (req.body ?? {}) as Form;
  const roleOptions = (req: FastifyRequest, roles: readonly Role[], selected?: Role) =>
    roles.map((r) => html`<option value="${r}"${r === selected ? html` selected` : ''}>${teamText(req.i18n).roleName(r)}</option>`);

  const rolesTable = (req: FastifyRequest) => {
    const t = teamText(req.i18n);
    const caps = [...PERMISSIONS, ...PORTAL_CAPABILITIES];
    return html`<h2>${t.roles}</h2><div class="scroll"><table class="roles"><thead><tr><th></th>${ROLES.map((r) => html`<th>${t.roleName(r)}</th>`)}</tr></thead><tbody>${caps.map(
      (c) => html`<tr><td class="mono">${c}</td>${ROLES.map((r) => html`<td>${ROLE_CAPABILITIES[r].includes(c) ? '✓' : ''}</td>`)}</tr>`,
    )}</tbody></table></div>`;
  };

  const bootstrapPage = (req: FastifyRequest) => {
    const t = teamText(req.i18n);
    return html`<div class="card"><p>${t.ownerBootstrapIntro}</p>
<form class="stack" method="post" action="/portal/team/owner">${portal.csrfField(req)}
<label>${t.email} <input name="email" type="email" required maxlength="254"></label>
<label>${t.name} <input name="name" maxlength="120"></label>
<button type="submit">${t.ownerBootstrap}</button></form></div>`;
  };

  const teamPage = async (req: FastifyRequest) => {
    const s = req.portal!;
    const t = teamText(req.i18n);
    const f = formatsOf(req.i18n);
    const members = await listMembers(ctx.db, s.key.merchant_id);
    if (!s.member) {
      const body = members.some((m) => m.role === 'owner') ? html`<p>${t.noTeamForKey}</p>` : bootstrapPage(req);
      return layout(req, t.team, html`${body}${rolesTable(req)}`, '/portal/team');
    }
    const me = s.member;
    const writable = can(s, 'members:write');
    const rows = members.map((m) => {
      const manage = writable && m.id !== me.id && mayManage(me.role, m.role, null);
      const grantable = ROLES.filter((r) => mayManage(me.role, m.role, r));
      return html`<tr data-member="${m.email}"><td data-label="${t.name}">${m.name || '—'}<br><span class="muted mono">${m.email}</span></td><td data-label="${t.role}">${t.roleName(m.role)}</td>
<td data-label="${t.status}">${t.statusName(m.status)}</td><td data-label="${t.secondFactorCol}">${m.totp_secret ? t.yes : t.no}</td>
<td${manage ? html` data-label="${t.actions}"` : ''}>${manage ? html`<form class="inline" method="post" action="/portal/team/${m.id}/role">${portal.csrfField(req)}<label>${t.role} <select name="role">${roleOptions(req, grantable, m.role)}</select></label><button type="submit" class="secondary">${t.changeRole}</button></form>
<form class="inline" method="post" action="/portal/team/${m.id}/remove">${portal.csrfField(req)}<button type="submit" class="danger">${t.remove}</button></form>` : ''}</td></tr>`;
    });
    const audit = await listAudit(ctx.db, s.key.merchant_id, 20);
    const [merchant] = await ctx.db.query<{ require_totp: boolean }>('SELECT require_totp FROM merchants WHERE id = $1', [s.key.merchant_id]);
    return layout(
      req,
      t.team,
      html`<div class="scroll"><table class="cards"><thead><tr><th>${t.name}</th><th>${t.role}</th><th>${t.status}</th><th>${t.secondFactorCol}</th><th>${t.actions}</th></tr></thead><tbody>${rows}</tbody></table></div>
${
  writable
    ? html`<h2>${t.invite}</h2><form class="stack card" method="post" action="/portal/team/invite">${portal.csrfField(req)}
<label>${t.email} <input name="email" type="email" required maxlength="254"></label>
<label>${t.name} <input name="name" maxlength="120"></label>
<label>${t.role} <select name="role">${roleOptions(req, ROLES.filter((r) => mayManage(me.role, null, r)), 'viewer')}</select></label>
<button type="submit">${t.inviteButton}</button></form>`
    : ''
}
${
  can(s, 'team:settings')
    ? html`<form class="inline card" method="post" action="/portal/team/settings">${portal.csrfField(req)}
<label class="check"><input type="checkbox" name="require_totp" value="1"${merchant?.require_totp ? html` checked` : ''}> ${t.requireTotp}</label><button type="submit" class="secondary">${t.save}</button></form>`
    : ''
}
${rolesTable(req)}
<h2>${t.auditLog}</h2><div class="scroll"><table class="cards"><thead><tr><th>${t.when}</th><th>${t.who}</th><th>${t.what}</th></tr></thead><tbody>${audit.map(
        (a) => html`<tr><td data-label="${t.when}">${f.dateTime(a.at)}</td><td data-label="${t.who}" class="mono">${a.actor}${a.client_ip ? html`<br><span class="muted">${a.client_ip}</span>` : ''}</td><td data-label="${t.what}"><span class="mono">${a.action}</span> <span class="muted mono">${JSON.stringify(a.target)}</span></td></tr>`,
      )}</tbody></table></div>`,
      '/portal/team',
    );
  };

  const guard = (req: FastifyRequest, reply: FastifyReply): FastifyReply | null => {
    if (!can(req.portal!, 'members:write')) return forbidden(req, reply, 'members:write');
    return stepUpRequired(portal, req, reply, '/portal/team');
  };

  app.get('/portal/team', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'members:read') && !(s.member === null && can(s, 'account:write'))) return forbidden(req, reply, 'members:read');
    return page(reply, await teamPage(req));
  });

  /** The answer to an invitation: the one-time link, shown once (a repeat of the form shows nothing). */
  const invited = async (req: FastifyRequest, reply: FastifyReply, run: (record: (tx: Parameters<typeof recordOutcome>[1]) => Promise<void>) => Promise<Invitation>) => {
    const s = req.portal!;
    const t = teamText(req.i18n);
    const formId = one(form(req), FORM_FIELD);
    if (!isFormId(formId)) return page(reply, layout(req, common(req.i18n).refused, html`<p>${common(req.i18n).noFormId}</p>`), 400);
    const claimed = await claimForm(ctx.idempotency, { merchantId: s.key.merchant_id, method: 'POST', path: idempotencyScopePath(req), key: formId });
    if (claimed.kind !== 'claimed') return reply.redirect('/portal/team', 303);
    try {
      const { member, token } = await run((tx) => recordOutcome(claimed.claim, tx, { kind: 'ok', text: 'invited', redirect: '/portal/team' }));
      const link = `${req.protocol}://${req.headers.host ?? 'localhost'}/portal/invite/${token}`;
      return page(
        reply,
        layout(
          req,
          t.team,
          html`<div class="flash ok" role="status">${t.invited(member.email)}</div><div class="card"><p class="mono" data-testid="invite-link">${link}</p>
<p class="muted">${t.inviteLinkNote}</p><p><a class="button" href="/portal/team">${t.team}</a></p></div>`,
          '/portal/team',
        ),
      );
    } catch (err) {
      await ctx.idempotency.release(claimed.claim);
      return page(reply, layout(req, t.team, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div><p><a href="/portal/team">${t.team}</a></p>`, '/portal/team'), 422);
    }
  };

  app.post('/portal/team/owner', async (req, reply) => {
    const s = req.portal!;
    if (s.member !== null || !can(s, 'account:write')) return forbidden(req, reply, 'members:write');
    const f = form(req);
    return invited(req, reply, () => inviteMember(ctx, actorOf(portal, req), null, s.key.merchant_id, { email: one(f, 'email') ?? '', name: one(f, 'name') ?? '', role: 'owner' }));
  });

  app.post('/portal/team/invite', async (req, reply) => {
    const stop = guard(req, reply);
    if (stop) return stop;
    const s = req.portal!;
    const f = form(req);
    return invited(req, reply, () =>
      inviteMember(ctx, actorOf(portal, req), s.member!.role, s.key.merchant_id, { email: one(f, 'email') ?? '', name: one(f, 'name') ?? '', role: one(f, 'role') ?? '' }),
    );
  });

  const memberId = (req: FastifyRequest) => {
    const id = Number((req.params as { id: string }).id);
    return Number.isSafeInteger(id) && id > 0 ? id : 0;
  };

  app.post('/portal/team/:id/role', async (req, reply) => {
    const stop = guard(req, reply);
    if (stop) return stop;
    const s = req.portal!;
    const role = one(form(req), 'role');
    return portal.action(req, reply, '/portal/team', async () => {
      if (!isRole(role)) throw invalidFields({ role: ['is not a role'] });
      await changeMember(ctx, actorOf(portal, req), s.member!.role, s.key.merchant_id, memberId(req), role);
      return teamText(req.i18n).roleChanged;
    });
  });

  app.post('/portal/team/:id/remove', async (req, reply) => {
    const stop = guard(req, reply);
    if (stop) return stop;
    const s = req.portal!;
    return portal.action(req, reply, '/portal/team', async () => {
      await changeMember(ctx, actorOf(portal, req), s.member!.role, s.key.merchant_id, memberId(req), null);
      return teamText(req.i18n).removed;
    });
  });

  app.post('/portal/team/settings', async (req, reply) => {
    if (!can(req.portal!, 'team:settings')) return forbidden(req, reply, 'team:settings');
    const stop = stepUpRequired(portal, req, reply, '/portal/team');
    if (stop) return stop;
    const on = one(form(req), 'require_totp') === '1';
    return portal.action(req, reply, '/portal/team', async () => {
      await setRequireTotp(ctx, actorOf(portal, req), req.portal!.key.merchant_id, on);
      return on ? teamText(req.i18n).requireTotpOn : teamText(req.i18n).requireTotpOff;
    });
  });
}
