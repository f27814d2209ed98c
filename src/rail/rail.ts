import type { PixKeyType } from '../pix/keys.js';

/**
 * The boundary between pixgate and the central bank's instant-payment rail (SPI for settlement,
 * DICT for the key directory, MED for infractions). Service code talks only to this interface;
 * `SimulatedRail` implements it for the sandbox, and a real rail adapter would implement it too.
 */
export interface DirectoryEntry {
  key: string;
  type: PixKeyType;
  /** Holder's name and document (CPF/CNPJ digits). */
  name: string;
  document: string;
  /** ISPB of the institution that holds the key. */
  ispb: string;
  bankName: string | null;
  /** Set when the key belongs to one of this institution's accounts. */
  accountId: number | null;
  /** The directory's anti-fraud marker: protection applies to payments to this key. */
  fraudFlagged: boolean;
}

export interface KeyRegistration {
  key: string;
  type: PixKeyType;
  name: string;
  document: string;
  accountId: number;
}

export class KeyAlreadyRegisteredError extends Error {
  override name = 'KeyAlreadyRegisteredError';
}

export interface KeyDirectory {
  /** Registers a key of one of this institution's accounts. Throws KeyAlreadyRegisteredError. */
  registerKey(registration: KeyRegistration): Promise<void>;
  /** Removes a key of this institution (compensation when local bookkeeping fails). */
  removeKey(key: string): Promise<void>;
  lookupKey(key: string): Promise<DirectoryEntry | null>;
}

export interface Rail {
  readonly directory: KeyDirectory;
}
