import { z } from 'zod';
import { readDocument } from '../../lib/documents.js';

/**
 * The debtor's document fields of the façade (cob, cobv): the standard's canonical spelling (CPF 11
 * digits; CNPJ 14 characters, alphanumeric since July 2026) with its check digits verified by
 * pixgate's one reader (src/lib/documents.ts).
 */
export const pixCpf = z.string().refine((s) => /^\d{11}$/.test(s) && 'value' in readDocument(s, { canonical: true }), 'deve ser um CPF válido (11 dígitos)');
export const pixCnpj = z
  .string()
  .refine((s) => /^[0-9A-Z]{12}\d{2}$/.test(s) && 'value' in readDocument(s, { canonical: true }), 'deve ser um CNPJ válido (14 caracteres: 12 dígitos ou letras maiúsculas e 2 dígitos verificadores)');
