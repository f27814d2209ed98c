import { addField, newFieldMap, type FieldMap } from '../../errors/catalog.js';
import { decimalToCents } from '../amount.js';
import type { CobvCommand } from './types.js';

/** The longest validadeAposVencimento pixgate takes (ten years): bounds every day count it does. */
export const MAX_DAYS_AFTER_DUE = 3650;

/**
 * The standard's semantic refusals of a cobv (`CobVOperacaoInvalida`) that the shape alone does not
 * catch, as violations keyed by field (`valor.desconto`): the due date before the charge's creation
 * date, a rebate or a discount of the whole amount or more (value ≥ original, percentage ≥ 100 %), a
 * fixed-date discount after the due date, discount modalities 1–2 without `descontoDataFixa` or with
 * `valorPerc`, 3–6 without `valorPerc` or with `descontoDataFixa`, an original of zero.
 */
export function cobvViolations(c: CobvCommand, createdOn: string): FieldMap {
  const fields = newFieldMap();
  if (c.dueDate < createdOn) addField(fields, 'calendario.dataDeVencimento', `não pode ser anterior à data de criação da cobrança (${createdOn})`);
  const original = decimalToCents(c.valor.original) ?? 0;
  if (original === 0) addField(fields, 'valor.original', 'não pode ser zero');
  const whole = (modalidade: number, valorPerc: string) => {
    const n = decimalToCents(valorPerc) ?? 0;
    return modalidade === 1 ? n >= original : n >= 10_000;
  };
  const a = c.valor.abatimento;
  if (a && whole(a.modalidade, a.valorPerc)) addField(fields, 'valor.abatimento', 'representa o valor da cobrança ou mais (ou 100 % ou mais)');
  const d = c.valor.desconto;
  if (d) {
    const fixed = d.modalidade === 1 || d.modalidade === 2;
    if (fixed) {
      if (!d.descontoDataFixa || d.descontoDataFixa.length === 0) addField(fields, 'valor.desconto', 'modalidade 1 ou 2 exige descontoDataFixa');
      if (d.valorPerc !== undefined) addField(fields, 'valor.desconto', 'modalidade 1 ou 2 não admite valorPerc (use descontoDataFixa)');
      for (const x of d.descontoDataFixa ?? []) {
        if (x.data > c.dueDate) addField(fields, 'valor.desconto', `a data ${x.data} é posterior à data de vencimento`);
        if (whole(d.modalidade, x.valorPerc)) addField(fields, 'valor.desconto', 'um desconto representa o valor da cobrança ou mais (ou 100 % ou mais)');
      }
      const dates = (d.descontoDataFixa ?? []).map((x) => x.data);
      if (new Set(dates).size !== dates.length) addField(fields, 'valor.desconto', 'descontoDataFixa repete uma data');
    } else {
      if (d.valorPerc === undefined) addField(fields, 'valor.desconto', `modalidade ${d.modalidade} exige valorPerc`);
      else if (whole(d.modalidade === 3 || d.modalidade === 4 ? 1 : 2, d.valorPerc)) addField(fields, 'valor.desconto', 'o desconto representa o valor da cobrança ou mais (ou 100 % ou mais)');
      if (d.descontoDataFixa !== undefined) addField(fields, 'valor.desconto', `modalidade ${d.modalidade} não admite descontoDataFixa`);
    }
  }
  return fields;
}
