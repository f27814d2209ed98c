/**
 * What an immediate charge (cob) and a due-date charge (cobv) check alike: the receiver's txid,
 * the PIX key it names, the payload location it is linked to.
 */
import type { Sql } from '../db/db.js';
import { invalidFields, type DomainError, type FieldMap } from '../errors/catalog.js';
import { brCodeKey, normalizePixKey } from '../pix/keys.js';
import { listOwnKeys, type PixKeyRow } from '../pix/ownKeys.js';
import { newLocationToken } from './locations.js';
import * as locations from './locationStore.js';

/** The receiver's txid of a cob or cobv: 26 to 35 letters or digits. */
export const TXID = /^[A-Za-z0-9]{26,35}$/;

/** A 400 naming one field of the request (the standard's `violacoes`). */
export function refused(field: string, message: string): DomainError {
  return invalidFields({ [field]: [message] } as FieldMap);
}

/** The account's active key that `chave` names (any of the standard's forms), or a 400 on `chave`. */
export async function activeKey(sql: Sql, accountId: number, chave: string): Promise<PixKeyRow> {
  const parsed = brCodeKey(chave);
  const keys = (await listOwnKeys(sql, accountId)).filter((k) => k.status === 'active');
  const match = keys.find((k) => k.key === chave || (parsed !== null && k.type === parsed.type && k.key === parsed.key) || normalizePixKey(k.type, chave) === k.key);
  if (!match) throw refused('chave', 'não é uma chave Pix ativa da conta deste recebedor');
  return match;
}

/**
 * The location a charge of type `tipo` will be linked to: the one named (free or already the
 * charge's own, of that type, of this account), or a new one.
 */
export async function linkableLocation(tx: Sql, accountId: number, tipo: 'cob' | 'cobv', locId: number | undefined, ownTxid: string | null, now: Date): Promise<locations.LocationRow> {
  if (locId === undefined) return locations.insertLocation(tx, accountId, tipo, newLocationToken(), now);
  const loc = await locations.lockLocation(tx, accountId, locId);
  if (!loc) throw refused('loc.id', 'a location referenciada não existe');
  if (loc.tipo_cob !== tipo) throw refused('loc.id', `a location referenciada é do tipo ${loc.tipo_cob} (deveria ser ${tipo})`);
  if (loc.txid !== null && loc.txid !== ownTxid) throw refused('loc.id', 'a location referenciada já está sendo utilizada por outra cobrança');
  return loc;
}

/** The object without its undefined fields (what a PATCH left out). */
export function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** A charge's state now, or as revision `revisao` left it; a 400 on `revisao` for one it never had. */
export function stateAtRevision<S extends { revisao: number }>(row: { revisao: number; revisions: S[] }, now: S, revisao: number | undefined): S {
  if (revisao === undefined || revisao === row.revisao) return now;
  const earlier = row.revisions.find((r) => r.revisao === revisao);
  if (!earlier) throw refused('revisao', `a cobrança não tem a revisão ${revisao} (a atual é ${row.revisao})`);
  return earlier;
}
