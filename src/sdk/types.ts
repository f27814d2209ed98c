/**
 * Request and answer types of the merchant API (`/api/external`), snake_case as pixgate speaks it.
 * Amounts in requests are integer cents; amounts in answers are base units (1 cent = 100 base
 * units). `Camelize<T>` gives the camelCase form (a client created with `keyCase: 'camel'`).
 */
type SnakeToCamel<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<SnakeToCamel<T>>}` : S;
export type Camelize<T> = T extends readonly (infer U)[]
  ? Camelize<U>[]
  : T extends object
    ? { [K in keyof T as K extends string ? SnakeToCamel<K> : K]: Camelize<T[K]> }
    : T;
export type KeyCase = 'snake' | 'camel';
export type Cased<T, C extends KeyCase> = C extends 'camel' ? Camelize<T> : T;

type Open = { [extra: string]: unknown };

export interface Balance extends Open {
  worked: true;
  account_id: number;
  currency: 'BRL';
  available: number;
  blocked: number;
  pending: number;
  ledger_total: number;
  safe: number;
  as_of: string;
}

export type PixKeyType = 'cpf' | 'cnpj' | 'email' | 'phone' | 'evp';

export interface CashOutInput {
  /** Integer cents (R$ 12.34 = 1234). */
  amount?: number;
  pix_key?: string;
  pix_key_type?: PixKeyType;
  emv?: string;
  description?: string;
  external_id?: string;
  [extra: string]: unknown;
}

export interface CashOutResult extends Open {
  worked: true;
  transaction_id: string;
  end_to_end_id: string | null;
  status: string;
  amount: number;
}

export interface TefInput {
  /** Integer cents. */
  amount: number;
  /** An account of your merchant; or send `pix_key`. */
  account_id?: number;
  /** A PIX key of an account of this institution; or send `account_id`. */
  pix_key?: string;
  pix_key_type?: PixKeyType;
  description?: string;
  external_id?: string;
}

export interface TefResult extends Open {
  worked: true;
  final: true;
  transaction_id: string;
  external_id: string | null;
  amount: number;
  status: 'settled';
  from_account_id: number;
  to_account_id: number | null;
}

export interface RefundInput {
  original_transaction_id?: string;
  original_e2e_id?: string;
  amount?: number;
  reason?: string;
  description?: string;
  [extra: string]: unknown;
}

export interface RefundResult extends Open {
  transaction_id: string;
  status: string;
}

export interface ChargeInput {
  /** Integer cents. */
  amount: number;
  expires_in?: number;
  payer_name?: string;
  payer_document?: string;
  description?: string;
  tag?: string;
  external_id?: string;
  pix_key?: string;
}

export interface Charge extends Open {
  worked: true;
  id: string;
  transaction_id: string;
  txid: string;
  status: 'created' | 'paid' | 'expired' | 'cancelled';
  amount: number;
  emv: string;
  qr_code_image: string;
  created_at: string;
  expires_at: string;
  paid_at: string | null;
  expired_at: string | null;
}

export interface ListParams {
  page?: number;
  per_page?: number;
  status?: 'settled' | 'rejected' | 'failed' | 'processing';
  type?: 'pix' | 'ted' | 'internal';
  date_from?: string;
  date_to?: string;
}

export interface StatementItem extends Open {
  id: string;
  transaction_id: string;
  end_to_end_id: string | null;
  type: string;
  status: string;
  payment_status: string | null;
  amount: number;
  direction: 'inbound' | 'outbound';
  created_at: string;
}

export interface Page<T> extends Open {
  worked: true;
  data: T[];
  page: number;
  per_page: number;
}

export interface TransactionRecord extends StatementItem {
  final: boolean;
}

export interface Receipt extends Open {
  worked: true;
  transaction_id: string;
  end_to_end_id: string;
  amount: number;
}

export interface MedListParams {
  page?: number;
  per_page?: number;
  status?: 'OPEN' | 'defense_submitted' | 'CLOSED' | 'CANCELLED';
  end_to_end_id?: string;
  date_from?: string;
  date_to?: string;
}

export interface Infraction extends Open {
  id: string;
  status: string;
  amount: number;
  transaction_id: string;
  end_to_end_id: string;
}

export interface DefenseInput {
  text: string;
  attachments?: Array<{ name?: string; url?: string; text?: string; [extra: string]: unknown }>;
}

export interface WebhookInput {
  url: string;
  events: string[];
  secret?: string;
  description?: string | null;
  allow_insecure?: boolean;
}

export interface Webhook extends Open {
  id: string;
  url: string;
  events: string[];
  secret: string;
  is_active: boolean;
  created_at: string;
}

export interface CatalogEvent extends Open {
  event: string;
  status: string;
  description: string;
  firing: 'active' | 'subscribable' | 'alias' | 'manual';
  alias_of: string | null;
}

export interface CpfValidation extends Open {
  worked: true;
  valid: boolean;
  cpf: string;
}

export interface PixKey extends Open {
  key: string;
  type: PixKeyType;
  status: string;
  created_at: string;
}

export interface PixKeyList {
  worked: true;
  data: PixKey[];
}

export interface FeedParams {
  after?: number;
  /** Event names (aliases read the event they stand for). */
  type?: string[];
  limit?: number;
}

export interface FeedEvent {
  sequence: number;
  id: string;
  event: string;
  account_id: number | null;
  subject: string;
  created_at: string;
  payload: Record<string, unknown>;
  /** The exact body a webhook delivery of this event carries. */
  body: string;
}

export interface FeedPage {
  worked: true;
  events: FeedEvent[];
  next_after: number;
  has_more: boolean;
}
