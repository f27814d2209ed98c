import type { Permission } from './permissions.js';

/**
 * The roles of a merchant's team members and what each may do in the portal (docs/portal.md,
 * "Roles"). A capability is a permission of the merchant API (what the API-key pages already check)
 * or one of the portal's own. The portal checks them server-side on every page and action.
 */
export const ROLES = ['owner', 'admin', 'finance', 'developer', 'support', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

/** Capabilities of the portal itself (no API key carries them). */
export const PORTAL_CAPABILITIES = ['keys:read', 'keys:write', 'members:read', 'members:write', 'team:settings'] as const;
export type PortalCapability = (typeof PORTAL_CAPABILITIES)[number];
export type Capability = Permission | PortalCapability;

const READ: Capability[] = ['account:read', 'statement:read', 'transfer:read', 'payment:read', 'pix:read'];

/** The table of docs/portal.md "Roles". */
export const ROLE_CAPABILITIES: Readonly<Record<Role, readonly Capability[]>> = {
  owner: [...READ, 'pix:write', 'transfer:write', 'payment:write', 'account:write', 'keys:read', 'keys:write', 'members:read', 'members:write', 'team:settings'],
  admin: [...READ, 'pix:write', 'transfer:write', 'payment:write', 'account:write', 'keys:read', 'keys:write', 'members:read', 'members:write'],
  finance: [...READ, 'pix:write', 'transfer:write'],
  developer: [...READ, 'account:write', 'keys:read', 'keys:write'],
  support: [...READ, 'payment:write'],
  viewer: READ,
};

/** Roles only an owner may grant, change or remove. */
export const OWNER_MANAGED: readonly Role[] = ['owner', 'admin'];

/** Whether a member of role `actor` may give `target` the role `to` (or remove them: `to` null). */
export function mayManage(actor: Role, target: Role | null, to: Role | null): boolean {
  if (actor === 'owner') return true;
  if (actor !== 'admin') return false;
  return !(target && OWNER_MANAGED.includes(target)) && !(to && OWNER_MANAGED.includes(to));
}
