import type { FastifyRequest } from 'fastify';
import { html, Html } from './html.js';

/**
 * The inputs of the portal's forms (docs/portal.md, "Field errors and sticky forms"): a label, the
 * control, and under it the field's errors from the last refusal of this form (`aria-invalid`,
 * `aria-describedby`); the control shows what was typed before that refusal. A form's state comes
 * from the session's flash only when the flash is about this form (its action path).
 */
export interface FormState {
  /** The value typed before the refusal, else `fallback`. */
  value(name: string, fallback?: string): string;
  /** Every value of a repeated field (checkboxes), else `fallback`. */
  values(name: string, fallback?: readonly string[]): readonly string[];
  errors(name: string): readonly string[];
  /** Whether the page shows a refusal of this form. */
  readonly refused: boolean;
}

export function formState(req: FastifyRequest, action: string): FormState {
  const f = req.portal?.flash;
  const mine = f && f.kind === 'error' && f.form === action ? f : undefined;
  const kept = mine?.values ?? {};
  const errors = mine?.fields ?? {};
  const has = (name: string) => Object.hasOwn(kept, name);
  return {
    refused: mine !== undefined,
    value: (name, fallback = '') => {
      if (!has(name)) return mine ? '' : fallback;
      const v = kept[name]!;
      return Array.isArray(v) ? (v[0] ?? '') : v;
    },
    values: (name, fallback = []) => {
      if (!has(name)) return mine ? [] : fallback;
      const v = kept[name]!;
      return Array.isArray(v) ? v : [v];
    },
    errors: (name) => (Object.hasOwn(errors, name) ? errors[name]! : []),
  };
}

export interface FieldSpec {
  name: string;
  label: string | Html;
  type?: 'text' | 'url' | 'number' | 'date' | 'datetime-local' | 'password' | 'email';
  required?: boolean;
  maxlength?: number;
  min?: number;
  placeholder?: string;
  inputmode?: 'decimal' | 'numeric';
  pattern?: string;
  autocomplete?: string;
  /** The value when the form is new. */
  value?: string;
  /** A textarea of this many rows. */
  rows?: number;
  /** A select of these options (value, label). */
  options?: readonly (readonly [string, string])[];
  hint?: string;
  spellcheck?: false;
}

const errId = (name: string) => `err-${name.replace(/[^A-Za-z0-9_-]/g, '_')}`;

/** A field's errors under its control. */
export function fieldErrors(state: FormState, name: string): Html {
  const errs = state.errors(name);
  return errs.length ? html`<span class="field-error" id="${errId(name)}" data-field="${name}">${errs.join('; ')}</span>` : html``;
}

/** One labelled field with its value and errors. */
export function field(state: FormState, spec: FieldSpec): Html {
  const errs = state.errors(spec.name);
  const invalid = errs.length ? html` aria-invalid="true" aria-describedby="${errId(spec.name)}"` : html``;
  const value = state.value(spec.name, spec.value ?? '');
  const attrs = html`name="${spec.name}"${spec.required ? html` required` : ''}${spec.maxlength ? html` maxlength="${spec.maxlength}"` : ''}${
    spec.placeholder ? html` placeholder="${spec.placeholder}"` : ''
  }${spec.autocomplete ? html` autocomplete="${spec.autocomplete}"` : ''}${spec.spellcheck === false ? html` spellcheck="false"` : ''}${invalid}`;
  let control: Html;
  if (spec.options) {
    control = html`<select ${attrs}>${spec.options.map(([v, l]) => html`<option value="${v}"${v === value ? html` selected` : ''}>${l}</option>`)}</select>`;
  } else if (spec.rows) {
    control = html`<textarea ${attrs} rows="${spec.rows}">${value}</textarea>`;
  } else {
    control = html`<input ${attrs}${spec.type && spec.type !== 'text' ? html` type="${spec.type}"` : ''}${spec.inputmode ? html` inputmode="${spec.inputmode}"` : ''}${
      spec.pattern ? html` pattern="${spec.pattern}"` : ''
    }${spec.min !== undefined ? html` min="${spec.min}"` : ''}${value ? html` value="${value}"` : ''}>`;
  }
  return html`<label>${spec.label}${spec.hint ? html` <span class="muted hint">${spec.hint}</span>` : ''} ${control}${fieldErrors(state, spec.name)}</label>`;
}
