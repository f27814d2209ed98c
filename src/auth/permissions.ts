/** Permissions of the spec's Permissions table. */
export const PERMISSIONS = [
  'pix:write',
  'pix:read',
  'transfer:write',
  'transfer:read',
  'payment:write',
  'payment:read',
  'account:write',
  'account:read',
  'statement:read',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}
